"""Protected spans (nmt/data/spans/): each kind finds what it keeps and leaves prose alone,
spans never overlap and are found again wherever they stand, data.spans and the glossary are
checked with one-line errors, sentinels round-trip."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nmt.config import from_dict
from nmt.data.spans import (
    KINDS,
    SpanRules,
    find_spans,
    holds_exactly,
    mask,
    misplaced_tags,
    parse,
    printf,
    python_format,
    rules,
    tags,
    unmask,
)
from nmt.data.spans.terms import MAX_BYTES, read_glossary
from nmt.errors import ConfigError

TERMS = ("Firefox", "GNOME Shell")
ALL = SpanRules(tuple(KINDS), TERMS)
EXAMPLES = [(kind, text) for kind, k in KINDS.items() for text in k.examples]


def texts(text: str, rules_: SpanRules = ALL) -> list[str]:
    return [s.text for s in rules_.find(text)]


@pytest.mark.parametrize(("kind", "example"), EXAMPLES)
def test_each_example_is_one_span_of_its_kind(kind: str, example: str) -> None:
    found = ALL.find(f"Before {example} after.")
    assert [(s.kind, s.text) for s in found] == [(kind, example)]


# text of scripts written without spaces between words, and Korean, whose particles join the
# word before: a span glued to it on either side is found alone
UNSPACED_TEXT = ["を開けません", "ファイル", "打开文件", "（注）", "ไฟล์", "파일을", "ຟາຍ", "ឯកសារ",
                 "ဖိုင်", "ཡིག་ཆ"]


@pytest.mark.parametrize(("kind", "example"), EXAMPLES)
@pytest.mark.parametrize("around", UNSPACED_TEXT)
def test_each_example_glued_to_unspaced_text_is_one_span(kind: str, example: str,
                                                         around: str) -> None:
    """``/proc/net/snmpを開けません``: the path, not the sentence (the kinds that end where a
    word ends read these scripts' letters as no word of theirs). After a letter, a slash
    starts no path, in any script (``32ビット/64ビット``, as ``Install/Remove``)."""
    slash = kind == "paths" and example[:1] in "/~." and around[-1:].isalnum()
    for text in (f"{around}{example}{around}", f"{example}{around}", f"{around}{example}"):
        found = [(s.kind, s.text) for s in ALL.find(text)]
        assert found == ([] if slash and text.startswith(around) else [(kind, example)]), text


@pytest.mark.parametrize(("text", "expected"), [
    ("--32/--64/--x32 32ビット/64ビット/x32 コードを生成する", ["--32"]),
    ("「/etc/passwd」を開く", ["/etc/passwd"]),
    ("設定/config.txt を読む", []),
    ("新しいFirefoxを起動", ["Firefox"]),
    ("%s: --color=autoは使えません", ["%s", "--color=auto"]),
])
def test_unspaced_text_around_spans(text: str, expected: list[str]) -> None:
    assert texts(text) == expected


# realistic strings of several formats, and the spans each holds
GOLDEN = [
    # gettext (C)
    ("Cannot open %s: %s", ["%s", "%s"]),
    ("Try '%s --help' for more information.", ["%s", "--help"]),
    ("--%s argument %s too large", ["%s", "%s"]),
    ("Argument %2$s für Option --%1$s zu groß", ["%2$s", "%1$s"]),
    ("%a %b %d %Y", ["%a", "%b", "%d", "%Y"]),
    ("Last seen %-d.%-m.%Y at %H:%M (%^a)", ["%-d", "%-m", "%Y", "%H", "%M", "%^a"]),
    ("%lu bytes written (100%% done)", ["%lu", "%%"]),
    ("`%s' is not a directory", ["%s"]),
    ("%pB: %pA: relocation against %p overflows", ["%pB", "%pA", "%p"]),  # binutils' pointers
    ("common of %pTrimage", ["%pT"]),  # capitals only: a word glued after it is not its
    # Python
    ("Hello {name}, you have {count:d} new messages", ["{name}", "{count:d}"]),
    ("{0!r:>10} is not {user.name} nor {items[0]}", ["{0!r:>10}", "{user.name}", "{items[0]}"]),
    ("%(filename)s: line %(line)d", ["%(filename)s", "%(line)d"]),
    # ICU / .NET
    ("{count, plural, one {# file} other {# files}} deleted",
     ["{count, plural, one {# file} other {# files}}"]),
    ("{gender, select, female {She} male {He} other {They}} replied to {0}",
     ["{gender, select, female {She} male {He} other {They}}", "{0}"]),
    ("Total: {0:N2} ({1,-10})", ["{0:N2}", "{1,-10}"]),
    # shell and templates
    ("Set ${HOME} or $XDG_CONFIG_HOME first; it costs $5", ["${HOME}", "$XDG_CONFIG_HOME"]),
    ("Welcome back, {{ user.name | title }}!", ["{{ user.name | title }}"]),
    ("{% if count %}{{ count }} items{% endif %}", ["{% if count %}", "{{ count }}",
                                                    "{% endif %}"]),
    # HTML / XML
    ("Click <b>Save</b> to keep<br/>your changes", ["<b>", "</b>", "<br/>"]),
    ('See <a href="https://example.org/help" class=x>the help</a>.',
     ['<a href="https://example.org/help" class=x>', "</a>"]),
    ('<x:ph id="1"/> of <!-- a note --> 2', ['<x:ph id="1"/>', "<!-- a note -->"]),
    ("Press <key>Enter</key> or <b>Esc", ["<key>", "</key>", "<b>"]),  # closed later; HTML
    # usage texts' metavariables in angle brackets are words, translated
    ("Set default hash table size close to <NUMBER>", []),
    ("use [<prefix>] instead of [PATCH]; <corrupt X4>", []),
    # --help lines
    ("  -v, --verbose          print more", ["-v", "--verbose"]),
    ("      --output=FILE      write to FILE (default: ~/.config/nmt/out.txt)",
     ["--output=", "~/.config/nmt/out.txt"]),  # FILE: a metavariable, translated
    ("      --color=auto       colour when a terminal", ["--color=auto"]),  # a literal value
    ("--lang=CATALOGNAME      set 'Language' field", ["--lang="]),
    ("-d, --dbname=CHAÎNE_CONNEX  chaîne de connexion", ["-d", "--dbname="]),
    ("Usage: readelf <option(s)> fichier(s)-elf", []),
    ("no <tool> given for --tool=<tool>", ["--tool="]),
    ("Turning on the '-e' option; use « -a » to see it", ["-e", "-a"]),
    ("  -rf                    remove /tmp/x and C:\\Temp\\y.log",
     ["-rf", "/tmp/x", "C:\\Temp\\y.log"]),
    # addresses and paths
    ("Report bugs to bugs@example.org or https://example.org/bugs?id=1.",
     ["bugs@example.org", "https://example.org/bugs?id=1"]),
    ("Visit www.example.org (or https://example.org/a_(b)).",
     ["www.example.org", "https://example.org/a_(b)"]),
    ("Edit docs/DATA.md, then run ./configure and ../bin/x", ["docs/DATA.md", "./configure",
                                                               "../bin/x"]),
    ("Open \\\\server\\share\\file.txt now", ["\\\\server\\share\\file.txt"]),
    # terms
    ("Firefox runs under GNOME Shell, not GNOME", ["Firefox", "GNOME Shell"]),
    ("Firefoxes are not Firefox", ["Firefox"]),
]

# prose that looks like spans and is not
PROSE = [
    "Install/Remove", "n/a", "input/output error", "Map/Scenario Editor", "km/h and/or",
    "100% sure, 50% off", "20 % of them", "Ends with %", "a well-known e-mail",
    "-5 degrees", "- an item", "It costs $5.", "a < b > c", "1/2 cup", "<b", "x {y",
    "{count, plural, one {# file}", "a } b { c",
    "TCP/IP over w/o", "Sun Type 7 USB (Japanese)/Japanese 106-key", "Try again.",
    "3.5/5 stars", "Is it 9:30 or 10?", "a 50%Mbps cap",
]


@pytest.mark.parametrize(("text", "expected"), GOLDEN)
def test_realistic_strings(text: str, expected: list[str]) -> None:
    assert texts(text) == expected


@pytest.mark.parametrize("text", PROSE)
def test_prose_is_not_a_span(text: str) -> None:
    assert texts(text) == []


def test_overlaps_go_to_the_leftmost_then_the_longest() -> None:
    """One rule: a template field is not a Python field inside braces, an address not a path,
    a %-mapping not a printf conversion, a tag with an address in it one tag."""
    found = ALL.find('{{ name }} https://x.org/a/b %(n)s <a href="http://x.org/">')
    assert [(s.kind, s.text) for s in found] == [
        ("shell", "{{ name }}"), ("urls", "https://x.org/a/b"), ("python", "%(n)s"),
        ("tags", '<a href="http://x.org/">')]
    # a date format's conversion that printf also reads is printf's, so its spans do not
    # depend on the kinds kept
    assert [(s.kind, s.text) for s in ALL.find("%d %b")] == [("printf", "%d"), ("strftime", "%b")]
    assert texts("%d %b", SpanRules(parse("strftime"))) == ["%d", "%b"]
    # a kind left out leaves its text to the others, still without overlaps
    assert texts("{{ name }}", SpanRules(parse("python"))) == []
    assert texts("see https://x.org/a/b", SpanRules(parse("paths"))) == []


def test_python_reads_literal_braces_first() -> None:
    """As ``str.format`` reads a text: ``{{`` and ``}}`` before any field."""
    text = "{{{name}}} {{x}} {y}}} {{0}"
    assert [text[a:b] for a, b in python_format.find(text)] == ["{name}", "{y}"]


def test_printf_reads_a_space_flag_only_in_a_format_string() -> None:
    """In prose ``50% done`` is no conversion; in a string known to be a format string (a PO
    entry flagged c-format) it is, as ``msgfmt -c`` reads it."""
    text = "50% done, % 5d and %s"
    assert texts(text) == ["%s"]
    assert [m[0] for m in printf.IN_FORMAT_STRING.finditer(text)] == ["% d", "% 5d", "%s"]


# --- properties ----------------------------------------------------------------------------------

WORDS = st.text("abcdefghijklmnopqrstuvwxyzéàü", min_size=1, max_size=8)
PIECES = st.lists(st.one_of(WORDS.map(lambda w: ("word", w)),
                            st.sampled_from(EXAMPLES).map(lambda e: ("span", e[1]))),
                  max_size=12)


def layout(pieces: list[tuple[str, str]]) -> tuple[str, list[tuple[int, str]]]:
    """The pieces joined by spaces, and where each span piece starts."""
    text, where = "", []
    for kind, piece in pieces:
        if text:
            text += " "
        if kind == "span":
            where.append((len(text), piece))
        text += piece
    return text, where


@settings(max_examples=300, deadline=None)
@given(PIECES, st.data())
def test_spans_are_found_again_at_their_place_whatever_words_surround_them(
        pieces: list[tuple[str, str]], data: st.DataObject) -> None:
    text, where = layout(pieces)
    found = ALL.find(text)
    assert [(s.start, s.text) for s in found] == where
    # other words around them: the same spans, at their new places
    changed = [(k, data.draw(WORDS) if k == "word" else p) for k, p in pieces]
    text2, where2 = layout(changed)
    assert [(s.start, s.text) for s in ALL.find(text2)] == where2


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("%s{}<>/$-:.@a1 \\~bx=\"'()#,")), max_size=60))
def test_spans_never_overlap_and_lie_within_the_text(text: str) -> None:
    found = ALL.find(text)
    for span in found:
        assert 0 <= span.start < span.end <= len(text)
        assert text[span.start:span.end] == span.text
    for a, b in zip(found, found[1:], strict=False):
        assert a.end <= b.start


@settings(max_examples=200, deadline=None)
@given(PIECES)
def test_mask_and_unmask_round_trip(pieces: list[tuple[str, str]]) -> None:
    text, where = layout(pieces)
    spans = ALL.find(text)
    masked, originals = mask(text, spans)
    assert originals == [piece for _, piece in where]
    assert re.findall(r"｟\d+｠", masked) == [f"｟{i}｠" for i in range(len(spans))]
    assert not any("｟" in s.text for s in ALL.find(masked))  # a sentinel is no span
    assert unmask(masked, originals) == text


def test_unmask_leaves_a_sentinel_of_no_span() -> None:
    assert unmask("a ｟1｠ b ｟0｠", ["%s"]) == "a ｟1｠ b %s"


# --- data.spans ----------------------------------------------------------------------------------


def test_parse_chooses_kinds_like_filters() -> None:
    default = parse("default")
    assert "terms" not in default and set(default) == set(KINDS) - {"terms"}
    assert parse("default", have_terms=True) == tuple(KINDS)
    assert parse("none") == ()
    assert parse("default,-options,-paths") == tuple(k for k in default
                                                     if k not in ("options", "paths"))
    assert parse("printf,python") == ("python", "printf")  # KINDS' order
    for bad, message in (("printf,default", "'default' may only come first"),
                         ("nope", "unknown kind 'nope'"),
                         ("terms", "terms: expected data.glossary")):
        with pytest.raises(ValueError, match=re.escape(message)):
            parse(bad)


@pytest.mark.parametrize(("data", "message"), [
    ({"spans": "bogus"}, "data.spans: unknown kind 'bogus'; expected default, none"),
    ({"spans": ["printf", "default"]}, "data.spans: 'default' may only come first"),
    ({"spans": "default,terms"}, "data.spans: terms: expected data.glossary"),
    ({"spans": 3}, "data.spans: expected a string"),
    ({"terms": [1, 2]}, "data.terms: expected a string"),
])
def test_config_errors_name_the_key(data: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        from_dict({"data": data}, "my.toml")
    assert message in str(e.value) and "\n" not in str(e.value)
    assert str(e.value).startswith("my.toml: ")


def test_config_lists_and_terms() -> None:
    cfg = from_dict({"data": {"spans": ["default", "-options", "terms"],
                              "terms": ["Firefox", "GNOME Shell"]}}).data
    assert cfg.spans == "default,-options,terms"
    chosen = rules(cfg.spans, cfg.glossary, cfg.terms)
    assert "options" not in chosen.kinds and chosen.terms == TERMS
    assert texts("Firefox -x", chosen) == ["Firefox"]


# --- the glossary --------------------------------------------------------------------------------


def test_glossary_terms(tmp_path: Path) -> None:
    path = tmp_path / "terms.txt"
    path.write_text("\ufeffFirefox\n\n  GNOME Shell  \nFirefox\nC++\n", encoding="utf-8")
    assert read_glossary(path) == ("Firefox", "GNOME Shell", "C++")
    chosen = rules("default", str(path))
    assert "terms" in chosen.kinds
    assert texts("Build C++ code in GNOME Shell", chosen) == ["C++", "GNOME Shell"]
    assert rules("default", "terms.txt", base=tmp_path).terms == chosen.terms


def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(("make", "message"), [
    (lambda d: d / "missing.txt", "file not found"),
    (lambda d: d, "not a regular file"),
    (fifo, "not a regular file"),
    (lambda d: (d / "b.bin").write_bytes(b"ab\0cd") and d / "b.bin", "binary (a NUL byte)"),
    (lambda d: (d / "l.txt").write_bytes(b"ok\n\xff\xfe\n") and d / "l.txt",
     "line 2: not valid UTF-8"),
    (lambda d: (d / "big.txt").write_bytes(b"term\n" * (MAX_BYTES // 5 + 1)) and d / "big.txt",
     "bytes; expected a list of terms under"),
    (lambda d: (d / "long.txt").write_text("x" * 300) and d / "long.txt",
     "line 1: 300 characters"),
    (lambda d: (d / "ctl.txt").write_text("a\tb\n") and d / "ctl.txt", "control characters"),
])
def test_a_glossary_that_is_not_text_is_a_one_line_error(tmp_path: Path, make: object,
                                                         message: str) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    with pytest.raises(ConfigError) as e:
        rules("default", str(path), where="my.toml: data.glossary")
    assert message in str(e.value) and "\n" not in str(e.value)
    assert str(e.value).startswith("my.toml: data.glossary ")


def test_find_spans_defaults() -> None:
    assert [s.text for s in find_spans("%s and Firefox")] == ["%s"]
    assert [s.text for s in find_spans("%s and Firefox", terms=["Firefox"])] == ["%s", "Firefox"]
    assert [s.text for s in find_spans("%s and {x}", kinds=["python"])] == ["{x}"]


def test_docs_list_every_kind() -> None:
    data = (Path(__file__).resolve().parents[1] / "docs" / "DATA.md").read_text(encoding="utf-8")
    missing = [kind for kind in KINDS if f"| `{kind}` |" not in data]
    assert not missing, f"docs/DATA.md, Protected spans: no row for {missing}"


# --- tags nested as the source's ---------------------------------------------------------------


@pytest.mark.parametrize(("sequence", "unpaired"), [
    ("<b> </b>", []),
    ("<b> <i> </i> </b>", []),
    ("</b> <b>", [0, 1]),  # closed before it opens
    ("<b> <i> </b> </i>", [0, 2]),  # crossed: </b> closes no innermost b, <b> stays open
    ("<b>", [0]),  # a fragment that opens and does not close
    ("</B> <b> </B>", [0]),  # HTML's names in either case
    ("<b> <br> <br/> <!-- x --> </b>", []),  # void, self-closing and comments pair with nothing
    ('<a href="x">|</a>|<x id="1"/>', []),
])
def test_unpaired_tags(sequence: str, unpaired: list[int]) -> None:
    """Each case: tags a space apart (``|`` where a tag holds a space)."""
    assert tags.unpaired(sequence.split("|" if "|" in sequence else " ")) == unpaired


def nested_oracle(sequence: list[str]) -> bool:
    """Every closing tag closes the last tag opened, and all are closed."""
    open_tags: list[str] = []
    for t in sequence:
        if t.startswith("</"):
            if not open_tags or open_tags.pop() != t[2:-1]:
                return False
        else:
            open_tags.append(t[1:-1])
    return not open_tags


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(["<b>", "</b>", "<i>", "</i>", "<em>", "</em>"]), max_size=10))
def test_no_tag_unpaired_only_when_nested(sequence: list[str]) -> None:
    assert (not tags.unpaired(sequence)) == nested_oracle(sequence)
    # the tags it finds unpaired are what keeps the rest from nesting
    left = set(tags.unpaired(sequence))
    assert nested_oracle([t for i, t in enumerate(sequence) if i not in left])


@pytest.mark.parametrize(("source", "output", "exact", "misplaced"), [
    ("Click <b>%s</b> now.", "Cliquez <b>%s</b> maintenant.", True, []),
    ("Click <b>%s</b> now.", "Cliquez</b> <b>%s maintenant.", False, ["</b>", "<b>"]),
    ("<b>Bold</b> and <i>it</i>", "<b>Gras et <i>it</b></i>", False, ["<b>", "</b>"]),
    ("<i>a</i> <b>b</b>", "<b>b</b> <i>a</i>", True, []),  # reordered pairs nest all the same
    ("Open <b>%s", "Ouvrir <b>%s", True, []),  # left open as the source leaves it
    ("Open <b>%s", "</b>Ouvrir %s", False, ["</b>"]),  # spans differ as well
    ("<b>%s</b>", "<b>%s</b> %s", False, []),
])
def test_exact_means_the_same_spans_nested_the_same(source: str, output: str, exact: bool,
                                                     misplaced: list[str]) -> None:
    wanted, got = ALL.find(source), ALL.find(output)
    assert holds_exactly(wanted, got) == exact
    assert [s.text for s in misplaced_tags(wanted, got)] == misplaced


@pytest.mark.parametrize(("tag", "opens"), [
    ("<b>", True), ('<a href="x">', True), ("<B>", True), ("</b>", False), ("<br/>", False),
    ("<br>", False), ("<img src=x>", False), ("<!-- c -->", False), ("<b/>", False)])
def test_which_tags_open_an_element(tag: str, opens: bool) -> None:
    from nmt.data.spans import tags

    assert tags.opens(tag) is opens
