"""Hostile input to the features that keep a text's structure, generated: any text through every
kind of protected span, the span repair, the sentinels, span augmentation and the layout of
lines; PO and XLIFF files mutated line by line and byte by byte through
``nmt.api.translate_file`` and ``nmt translate``; glossary files of any bytes, and what is no
file.

The defined behaviour: span finding, the layout and the repair take time in proportion to the
text; spans lie inside the text and never overlap; the repair never raises in ``repair`` mode
and gives back the source's spans or counts the line as unplaced, ``strict`` raises only
:class:`UnplacedSpan`; masking then unmasking gives the text back. A localisation file is
filled into a valid file (``msgfmt -c`` accepts it when it accepts the input; only the strings
that were empty change) or refused in one line naming ``--input``, an earlier output left byte
for byte and no new one written. A glossary is read as documented (one term a line, blank lines
skipped) or refused in one line naming ``data.glossary``. Nothing else is ever raised.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import polib
import pytest
from conftest import deadline, invoke
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_localisation import CATALOGUE, XLIFF, XLIFF2, shout, shout_xml

from nmt.api import translate_file
from nmt.config import DecodeConfig
from nmt.data.span_augment import augment_pair
from nmt.data.spans import KINDS, SpanRules, mask, parse, rules, terms, unmask
from nmt.data.spans.terms import MAX_BYTES
from nmt.errors import ConfigError, NmtError
from nmt.localisation import po as po_file
from nmt.translation.layout import lay_out
from nmt.translation.structure import (
    MARKUP,
    Repair,
    SpanGuard,
    UnplacedSpan,
    guarded,
    repair_line,
    without_tags,
)
from nmt.translation.translator import StreamTranslator, TruncateHook

FIXTURE = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
TERMS = ("Firefox", "GNOME Shell", "C++", "a.b", "x")
ALL = SpanRules(tuple(KINDS), TERMS)
DEFAULT = SpanRules(parse("default"))
FINDERS = {name: kind.find or terms.finder(TERMS) for name, kind in KINDS.items()}

# what breaks a parser: unclosed and unbalanced markup, escapes, a lone % at the end, sentinels,
# the unknown marks, line and paragraph separators
FRAGMENTS = [
    "%", "%%", "%s", "%1$", "%(", "%(n)", "%-", "{", "}", "{{", "}}", "{%", "%}", "{0", "{0,",
    "{0, plural, one {", "{n, select, other {x}}", "{name", "<", ">", "</", "/>", "<b>x", "</i>",
    '<a href="', "<!--", "-->", "<unk>", "/", "//", "./", "~/", "C:\\", "\\\\", "\\", "\\n",
    "\\t", "$", "${", "$HOME", "-", "--", "--x=", "-x", '"', "'", "`", "http://",
    "https://x.org/(", "(", ")", "www.", "@", "a@b.c", ".", ",", ":", "#", "｟0｠", "｟1｠", "｟",
    "｠", "⁇", " ", "  ", "\t", "\n", "\r", "\u00a0", "\u2028", "Firefox", "GNOME Shell", "C++",
    "é", "中", "word",
]
TEXT = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=4), max_size=24).map("".join)
SIZE = 200_000  # characters of a text whose spans are found under a hang guard
HANG = 30  # seconds: a guard against hanging, not a speed test. Finding the spans of SIZE
# characters takes a fraction of a second; a finder whose time grows with the square of the
# text took 2-25 s at 50,000 characters, so 16 times that here


def spans_of(text: str, rules_: SpanRules = ALL) -> Counter[str]:
    return Counter(s.text for s in rules_.find(text))


def one_line(error: BaseException) -> str:
    message = str(error)
    assert message and "\n" not in message and "\r" not in message, repr(message)
    return message


# --- spans on any text -------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_every_kind_finds_spans_inside_the_text_and_the_registry_keeps_them_apart(
        text: str) -> None:
    for name, find in FINDERS.items():
        for start, end in find(text):
            assert 0 <= start <= end <= len(text), (name, start, end)
    found = ALL.find(text)
    for span in found:
        assert 0 <= span.start < span.end <= len(text) and text[span.start:span.end] == span.text
    for a, b in zip(found, found[1:], strict=False):
        assert a.end <= b.start


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TEXT, TEXT.filter(bool), TEXT)
@example("", "{%", "")  # each an opening its finder once scanned to the end of the line for
@example("", "{a, plural ", "")
@example("https://x.org/a", ")", "")
@example("", "<a b='", "")
@example("", "%(", "")
def test_finding_the_spans_of_a_long_text_never_hangs(prefix: str, unit: str,
                                                            suffix: str) -> None:
    """A text of SIZE characters, ``unit`` over and over between ``prefix`` and ``suffix``:
    every kind finds its spans without hanging."""
    text = prefix + unit * (SIZE // len(unit) + 1) + suffix
    for name, find in FINDERS.items():
        with deadline(HANG, f"{name}: {unit!r:.40} x {SIZE // len(unit)}"):
            for _ in find(text):
                pass


SPAN_PIECES = st.sampled_from([t for kind in KINDS.values() for t in kind.examples])
LINE = st.lists(TEXT | SPAN_PIECES, max_size=6).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(LINE, LINE)
def test_the_repair_of_any_output_keeps_the_sources_spans_or_says_it_could_not(
        source: str, output: str) -> None:
    wanted = spans_of(source)
    repair = repair_line(source, output, ALL)
    assert isinstance(repair.text, str)
    assert spans_of(repair.text) == wanted or repair.unplaced
    strict = repair_line(source, output, ALL, guess=False)
    assert spans_of(strict.text) == wanted or strict.unplaced
    assert strict.guessed == 0


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(LINE, LINE), max_size=5), st.sampled_from(["repair", "strict", "off"]),
       st.sampled_from(MARKUP))
@example([("%%A", "{%}")], "repair", "place")  # the % taken out left {}, a span: invented
@example([("%%A", "{%}")], "strict", "place")
def test_a_guard_in_any_mode_raises_nothing_but_its_refusal(pairs: list[tuple[str, str]],
                                                             mode: str, markup: str) -> None:
    sources = [s for s, _ in pairs]
    bare = markup == "place" and mode != "off"  # what the engine is given: the tags taken out
    engine = {without_tags(s, ALL) if bare else s: o for s, o in pairs}
    guard = SpanGuard(ALL, mode, markup)
    try:
        outputs = guarded(lambda xs: [engine[x] for x in xs], sources, guard)
    except UnplacedSpan as e:
        assert mode == "strict"
        assert re.match(rf"line {e.index + 1}: the translation (lost|put) ", one_line(e))
        return
    assert len(outputs) == len(sources)
    if mode == "off":
        assert outputs == [engine[s] for s in sources]
    else:
        kept = sum(spans_of(o) == spans_of(s) for s, o in zip(sources, outputs, strict=True))
        assert kept + guard.counts.unplaced >= len(sources)


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_masking_then_unmasking_gives_the_text_back(text: str) -> None:
    masked, originals = mask(text, ALL.find(text))
    assert unmask(masked, originals) == text
    junk = text + "｟" + "9" * 5_000 + "｠"  # what a model may write: a sentinel of no span
    assert unmask(junk, originals[:1]).endswith(junk[len(text):])


@settings(max_examples=200, deadline=None)
@given(LINE, LINE, st.integers(0, 1000))
def test_span_augmentation_of_any_pair_puts_in_the_same_spans_on_both_sides(
        src: str, tgt: str, index: int) -> None:
    rewritten = augment_pair(src, tgt, index, 1.0, 7, rules=DEFAULT)
    if rewritten is not None:
        assert not DEFAULT.find(src) and not DEFAULT.find(tgt)
        assert spans_of(rewritten[0], DEFAULT) == spans_of(rewritten[1], DEFAULT)


@settings(max_examples=300, deadline=None)
@given(st.lists(TEXT, max_size=4))
def test_the_layout_of_any_lines_gives_one_clean_line_for_each(lines: list[str]) -> None:
    layout = lay_out([line.replace("\n", " ") for line in lines])
    out = layout.join(["T"] * len(layout.segments))
    assert len(out) == len(lines)
    assert all(len(line.splitlines()) <= 1 for line in out), out


@pytest.mark.parametrize("unit", [" ", "a ", "\\n", "<b>", "%s "])
def test_laying_out_and_repairing_a_long_line_never_hangs(unit: str) -> None:
    """The pieces of a string (:func:`nmt.localisation.filled.translate_texts`), the layout of a
    line, and the repair of an output that lost every span of a source of thousands of them,
    without hanging."""
    from nmt.localisation.filled import translate_texts

    line = "x" + unit * (SIZE // len(unit)) + "y"
    with deadline(HANG, f"{unit!r} x {SIZE // len(unit)}"):
        assert translate_texts(lambda xs: xs, [line]) == [line]
        lay_out([line])
        repair_line(line[:20_000], "x y", DEFAULT)


def test_a_sentence_of_more_spans_than_a_sentence_has_is_kept_as_written_and_said() -> None:
    source = "<b>x</b> " * 200
    repair = repair_line(source, "y", DEFAULT)
    assert repair.text == "y" and repair.unplaced
    assert repair_line(source, source, DEFAULT) == Repair(source, 400)  # nothing to say
    with pytest.raises(UnplacedSpan) as e:
        guarded(lambda xs: ["y"] * len(xs), [source], SpanGuard(DEFAULT, "strict"))
    assert "and 395 more" in one_line(e.value) and len(str(e.value)) < 500
    seen: list[str] = []  # tags taken out only where they would be placed again
    assert guarded(lambda xs: seen.extend(xs) or list(xs), [source], SpanGuard(DEFAULT)) == [
        source] and seen == [source]


# --- a fake translator -------------------------------------------------------------------------


def lose_spans(texts: Sequence[str]) -> list[str]:
    """A fake engine that drops every other word with a placeholder or markup in it, and writes
    the rest in capitals: what the span guard must repair, or refuse in strict mode."""
    out = []
    for text in texts:
        words = text.split(" ")
        marked = [i for i, w in enumerate(words) if re.search(r"[%{<$/-]", w)]
        out.append(" ".join(w.upper() for i, w in enumerate(words)
                            if i not in marked[::2]))
    return out


class Fake(StreamTranslator):
    """A translator the API takes: ``engine`` writes the translations, the span guard of the
    default kinds checks them in ``mode``."""

    def __init__(self, engine: Callable[[Sequence[str]], list[str]], mode: str) -> None:
        self.engine = engine
        self.cfg = DecodeConfig()
        self.lowercase, self.normalization = False, "natural"
        self.source_lang, self.target_lang = "en", "de"
        self.spans = SpanGuard(DEFAULT, mode)

    def translate_as_written(self, texts: Sequence[str],
                             on_truncate: TruncateHook | None = None) -> list[str]:
        return self.engine(texts)


ENGINES = st.sampled_from([(shout, "repair"), (shout, "strict"), (lose_spans, "repair"),
                           (lose_spans, "strict"), (lose_spans, "off")])


# --- mutations ---------------------------------------------------------------------------------

WHERE = st.integers(0, 1 << 20)
JUNK_BYTES = st.sampled_from([b"\x00", b"\xff", b"\xc3", b"\xe2\x80", b'"', b"\\", b"%", b"\r",
                              b"\n", b"\xef\xbb\xbf", b"<", b"&", b"]]>", b"{"]) | st.binary(
                                  min_size=1, max_size=4)


def mutations(junk_lines: Sequence[str], extra: Sequence[Any] = ()) -> st.SearchStrategy[Any]:
    junk = st.sampled_from(junk_lines)
    return st.one_of(
        st.tuples(st.just("delete line"), WHERE),
        st.tuples(st.just("duplicate line"), WHERE),
        st.tuples(st.just("copy line"), WHERE, WHERE),
        st.tuples(st.just("insert line"), WHERE, junk),
        st.tuples(st.just("replace line"), WHERE, junk),
        st.tuples(st.just("flip byte"), WHERE, st.integers(1, 255)),
        st.tuples(st.just("insert bytes"), WHERE, JUNK_BYTES),
        st.tuples(st.just("delete bytes"), WHERE, st.integers(1, 40)),
        st.tuples(st.just("truncate"), WHERE),
        st.tuples(st.just("crlf")),
        *extra,
    )


def mutate(data: bytes, mutation: tuple[Any, ...]) -> bytes:
    what, *args = mutation
    lines = data.splitlines(keepends=True) or [b""]
    where = args[0] if args and isinstance(args[0], int) else 0
    i, at = where % len(lines), where % (len(data) + 1)
    if what == "delete line":
        del lines[i]
    elif what == "duplicate line":
        lines.insert(i, lines[i])
    elif what == "copy line":
        lines[i] = lines[args[1] % len(lines)]
    elif what == "insert line":  # the end too
        lines.insert(where % (len(lines) + 1), args[1].encode("utf-8") + b"\n")
    elif what == "replace line":
        lines[i] = args[1].encode("utf-8") + b"\n"
    elif what == "flip byte":
        return data[:at] + bytes([data[at] ^ args[1]]) + data[at + 1:] if at < len(data) else data
    elif what == "insert bytes":
        return data[:at] + args[1] + data[at:]
    elif what == "delete bytes":
        return data[:at] + data[at + args[1]:]
    elif what == "truncate":
        return data[:at]
    elif what == "crlf":
        return data.replace(b"\n", b"\r\n")
    elif what == "charset":
        return re.sub(rb"charset=[A-Za-z0-9_.:-]*", b"charset=" + args[0].encode(), data)
    elif what == "encoding":
        return data.replace(b'encoding="UTF-8"', b'encoding="' + args[0].encode() + b'"')
    elif what == "percent":  # a % at the end of a msgid
        found = list(re.finditer(rb'^(msgid "[^\n]*)"$', data, re.MULTILINE))
        if found:
            m = found[args[1] % len(found)]
            return data[:m.end(1)] + b'%"' + data[m.end():]
    elif what == "no header":
        return data.split(b"\n\n", 1)[-1]
    return b"".join(lines)


def mutated(text: str, edits: Sequence[tuple[Any, ...]]) -> bytes:
    """``text`` in UTF-8 with ``edits`` (:func:`mutate`) applied in turn."""
    data = text.encode("utf-8")
    for edit in edits:
        data = mutate(data, edit)
    return data


def run_mutated(tmp_path: Path, name: str, data: bytes, previous: bytes | None,
                translator: StreamTranslator) -> tuple[Path, Path, Any]:
    """``translate_file`` on ``data``: the input, the output and what it returned, or the error
    it raised (a :class:`NmtError`: any other exception fails the test), checked for one line
    naming the input, with the output as it was before."""
    folder = tmp_path / "files"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    source, out = folder / f"in.{name}", folder / f"out.{name}"
    source.write_bytes(data)
    if previous is not None:
        out.write_bytes(previous)
    try:
        filled = translate_file(translator, source, out, warn=lambda m: None)
    except NmtError as e:
        assert one_line(e).startswith(f"--input {source}: "), str(e)
        assert (out.read_bytes() if out.exists() else None) == previous
        assert sorted(p.name for p in folder.iterdir()) == sorted(
            [source.name] + ([out.name] if previous is not None else []))
        return source, out, e
    assert sorted(p.name for p in folder.iterdir()) == sorted([source.name, out.name])
    return source, out, filled


# --- PO files ----------------------------------------------------------------------------------

# every kind of entry: the catalogue of test_localisation and what it lacks (a previous msgid, a
# lone % in a c-format string, escapes, a string that starts on its second line, markup)
PO = CATALOGUE.replace('"Content-Transfer-Encoding: 8bit\\n"\n', '"Content-Transfer-Encoding: '
                       '8bit\\n"\n"Plural-Forms: nplurals=2; plural=(n != 1);\\n"\n') + r'''
#, c-format
#| msgid "Old %s"
msgid "Progress: 50%"
msgstr ""

msgid "Tab\there, \"quoted\", back\\slash"
msgstr ""

#. a string on several lines, with markup
#, fuzzy, python-brace-format
#| msgid "Old {n}"
msgid ""
"Line one {n}\n"
"Line <b>two</b> at /usr/bin/x --force"
msgstr ""

#~ msgctxt "gone"
#~ msgid "Older"
#~ msgstr "Älter"
'''
PO_JUNK = [
    'msgid "', '"', 'msgstr "unterminated', 'msgstr[1] "x"', 'msgstr[12] ""',
    'msgid_plural "%d things"', '#| msgid "a"', "#, c-format", "#, fuzzy", '#~ msgid "gone"',
    '#~ msgstr "weg"', "#~", '""', '"%"', 'msgid "%"', 'msgid "100%"', 'msgctxt ""', 'msgid ""',
    'msgstr ""', '"Plural-Forms: nplurals=3; plural=n>1;\\n"', '"Plural-Forms: nplurals=0;\\n"',
    '"Plural-Forms: nplurals=99999999999999999999;\\n"', '"Plural-Forms: nplurals=' + "9" * 5000
    + ';\\n"', '"Language: xx\\n"', '"Language: ru\\n"', 'msgid "a" "b"', 'msgid "x\\"', '"\\',
    'msgid "{0, plural, one {"', 'msgid "<b>x"', "#: a.c:1", "# comment", "#.", "#:", "#,",
    "nonsense", "   ", '\t"x"', 'msgid\t"tab"', 'msgstr[0]"x"', 'msgstr[x] ""', 'msgid "\\N"',
    'msgid "a\\u00e9"', 'msgid "\\ud800"', 'msgstr "%s %s %s"',
]
CHARSETS = ["UTF-8", "ISO-8859-1", "ASCII", "CHARSET", "cp1252", "utf-16", "UTF-32", "utf-7",
            "koi8-r", "shift_jis", "rot13", "rot_13", "base64", "hex", "zlib", "bz2", "uu",
            "quopri", "idna", "punycode", "undefined", "unicode_escape", "raw_unicode_escape",
            "nonsense", ""]
PO_MUTATIONS = mutations(PO_JUNK, [
    st.tuples(st.just("charset"), st.sampled_from(CHARSETS)),
    st.tuples(st.just("percent"), st.just(0), WHERE),
    st.tuples(st.just("no header")),
])
MSGFMT = shutil.which("msgfmt")


def msgfmt_accepts(path: Path) -> bool:
    assert MSGFMT is not None
    return subprocess.run([MSGFMT, "-c", "-o", os.devnull, str(path)], capture_output=True,
                          timeout=60).returncode == 0


def entries(catalog: polib.POFile) -> list[tuple[Any, ...]]:
    return [(e.msgctxt, e.msgid, e.msgid_plural, e.obsolete) for e in catalog]


def test_the_catalogue_mutated_is_valid_and_filled(tmp_path: Path) -> None:
    source, out, filled = run_mutated(tmp_path, "po", PO.encode("utf-8"), None,
                                      Fake(shout, "repair"))
    assert filled.filled == 10 and filled.left == 0
    if MSGFMT is not None:
        assert msgfmt_accepts(source) and msgfmt_accepts(out)


@settings(max_examples=120, deadline=None, suppress_health_check=FIXTURE)
@given(st.lists(PO_MUTATIONS, max_size=3), st.sampled_from([None, b"earlier\n"]), ENGINES)
@example([("no header",)], None, (shout, "repair"))
@example([("no header",), ("delete line", 0)], None, (shout, "repair"))
@example([("delete line", -5)], None, (shout, "repair"))  # the last msgstr
@example([("no header",), ("replace line", 4, 'msgstr "%s %s %s"')], None, (shout, "repair"))
@example([("charset", "rot13")], None, (shout, "repair"))
@example([("charset", "idna")], None, (shout, "repair"))
@example([("charset", "raw_unicode_escape"), ("replace line", 20, 'msgid "\\ud800"')], None,
         (shout, "repair"))
@example([("replace line", 15, '"Plural-Forms: nplurals=' + "9" * 5000 + ';\\n"')], None,
         (shout, "repair"))
@example([("replace line", 15, '"Plural-Forms: nplurals=99999999999999999999;\\n"')], None,
         (shout, "repair"))
@example([], None, (lose_spans, "strict"))
@example([("insert line", -1, "#,")], None, (shout, "repair"))  # polib dropped the last entry
@example([("crlf",), ("crlf",)], None, (shout, "repair"))  # a blank line inside the header
@example([("flip byte", 1, 1), ("truncate", 2)], None, (shout, "repair"))  # "#!"
@example([("delete line", 45)], None, (shout, "repair"))  # msgstr[N], no msgid_plural
@example([("delete line", 70)], None, (shout, "repair"))  # "#~ msgstr" alone: a second header
@example([("replace line", 70, 'msgid "\\N"')], None, (shout, "repair"))  # then "#~ msgstr"
@example([("insert line", 16, '"Plural-Forms: nplurals=3; plural=n>1;\\n"')], None,
         (shout, "repair"))  # a header field twice
@example([("insert line", 0, "#."), ("percent", 0, 0)], None,
         (shout, "repair"))  # no header, and "#." alone before the file's comments
def test_a_mutated_po_file_is_filled_validly_or_refused_in_one_line(
        tmp_path: Path, edits: list[tuple[Any, ...]], previous: bytes | None,
        engine: tuple[Callable[[Sequence[str]], list[str]], str]) -> None:
    data = mutated(PO, edits)
    source, out, result = run_mutated(tmp_path, "po", data, previous, Fake(*engine))
    if isinstance(result, NmtError):
        return
    written = out.read_bytes().decode("utf-8")
    after = po_file.parse(written, "out")  # nmt reads back what it wrote
    before = po_file.parse(po_file.decode(data, "in"), "in")
    assert entries(after) == entries(before)
    for old, new in zip(before, after, strict=True):
        filled = po_file._untranslated(old) and (new.msgstr or any(new.msgstr_plural.values()))
        if not filled:
            assert (new.msgstr, new.msgstr_plural, new.flags) == \
                (old.msgstr, old.msgstr_plural, old.flags)
        else:
            assert new.flags == (old.flags if "fuzzy" in old.flags else ["fuzzy", *old.flags])
        assert (new.comment, new.tcomment, new.occurrences, new.previous_msgid) == \
            (old.comment, old.tcomment, old.occurrences, old.previous_msgid)
    if MSGFMT is not None and msgfmt_accepts(source):
        assert msgfmt_accepts(out), written


# --- XLIFF files -------------------------------------------------------------------------------

XLF = XLIFF.replace("<source>Save</source>",
                    "<source>Save %s to <b>/tmp/x</b> with {name}</source>")
XLF_JUNK = [
    "<", "</trans-unit>", '<trans-unit id="9">', "<source>", "</source>", "<target/>",
    "<target></target>", '<target state="new"> </target>', "<seg-source/>", "<g id='1'>", "</g>",
    '<x id="3"/>', "<ph>&lt;</ph>", "&", "&amp;", "&unknown;", "&#0;", "&#x10FFFF;",
    "<![CDATA[ x < y ]]>", "<!-- -->", "<?pi x?>", '<!DOCTYPE x [<!ENTITY a "b">]>',
    '<xliff version="2.0">', '<?xml version="1.0" encoding="latin1"?>', "<body>",
    '<trans-unit id="9" translate="no"><source>x</source></trans-unit>',
    '<trans-unit id="8"><source>a <g id="1">b</source></trans-unit>', "\u2028", "%s", "{0",
    "<alt-trans><source>x</source><target>y</target></alt-trans>", "<alt-trans>",
    '<seg-source><mrk mid="0" mtype="seg">Go.</mrk> <mrk mid="1" mtype="seg">%s</mrk>'
    "</seg-source>", '<target><mrk mid="1" mtype="seg"/></target>', '<mrk mid="0" mtype="seg">',
    '<mrk mtype="seg"></mrk>',
]
XLF_MUTATIONS = mutations(XLF_JUNK, [
    st.tuples(st.just("encoding"), st.sampled_from(["utf-8", "ascii", "UTF-16", "latin1", "x"])),
])
# a start tag's attributes, whose quoted values may hold a ">" (a mutation's "]]>")
_ATTRIBUTES = r"""(?:[^>"']|"[^"]*"|'[^']*')*?"""
_NEW_OR_EMPTY_TARGET = re.compile(  # (empty: nothing in it but empty segments, if any)
    rf"\s*<(?:\w+:)?target\b{_ATTRIBUTES}(?:/>|>(?:\s*<(?:\w+:)?mrk\b{_ATTRIBUTES}"
    r"(?:/>|>\s*</(?:\w+:)?mrk>))*\s*</(?:\w+:)?target>"
    r"|state-qualifier=\"mt-suggestion\">.*?</(?:\w+:)?target>)", re.DOTALL)


@settings(max_examples=120, deadline=None, suppress_health_check=FIXTURE)
@given(st.lists(XLF_MUTATIONS, max_size=3), st.sampled_from([None, b"earlier\n"]),
       st.sampled_from([(shout_xml, "repair"), (shout_xml, "strict"), (lose_spans, "repair")]))
@example([("encoding", "ascii"), ("insert bytes", XLF.index("Open the file"), b"&#xE9;")], None,
         (shout_xml, "repair"))
def test_a_mutated_xliff_file_is_filled_well_formed_or_refused_in_one_line(
        tmp_path: Path, edits: list[tuple[Any, ...]], previous: bytes | None,
        engine: tuple[Callable[[Sequence[str]], list[str]], str]) -> None:
    # the new targets and the empty ones they replace aside, every byte as it was
    filled_well_formed_or_refused(tmp_path, mutated(XLF, edits), previous, engine,
                                  lambda text: _NEW_OR_EMPTY_TARGET.sub("", text.decode("utf-8")))


def filled_well_formed_or_refused(tmp_path: Path, data: bytes, previous: bytes | None,
                                  engine: tuple[Callable[[Sequence[str]], list[str]], str],
                                  rest: Callable[[bytes], str]) -> None:
    """The XLIFF document ``data`` filled: refused in one line (:func:`run_mutated`), or
    written well-formed with ``rest`` of it (what nmt does not write) as it was."""
    from xml.parsers import expat

    source, out, result = run_mutated(tmp_path, "xlf", data, previous, Fake(*engine))
    if isinstance(result, NmtError):
        return
    written = out.read_bytes()
    expat.ParserCreate().Parse(written, True)  # well-formed
    assert rest(written) == rest(data)


XLF2 = XLIFF2.replace("<source>Open the file.</source>",
                      "<source>Save %s to <pc id='7'>/tmp/x</pc> with {name}</source>")
XLF2_JUNK = [
    "<", "</segment>", '<segment id="9">', "<segment state='final'>", "<source>", "</source>",
    "<target/>", "<target></target>", "<target> </target>", "<pc id='1'>", "</pc>",
    '<ph id="3"/>', '<sc id="4"/>', '<ec startRef="4"/>', "<mrk id='5' translate='no'>",
    "</mrk>", "<ignorable><source> </source></ignorable>", "</unit>", '<unit id="9">',
    '<unit id="8" translate="no">', "&", "&amp;", "&#0;", "<![CDATA[ x < y ]]>", "<!-- -->",
    '<xliff version="1.2">', '<xliff version="2.1">', "<segment subState='x:y'>", "%s", "{0",
    "<m:matches xmlns:m='urn:oasis:names:tc:xliff:matches:2.0'><m:match><source>x</source>"
    "<target>y</target></m:match></m:matches>",
]
XLF2_MUTATIONS = mutations(XLF2_JUNK, [
    st.tuples(st.just("encoding"), st.sampled_from(["utf-8", "ascii", "UTF-16", "latin1", "x"])),
])
_SEGMENT_START = re.compile(rf"<(?:\w+:)?segment\b{_ATTRIBUTES}>")
_TAG = re.compile(rf"<(/?)(?:\w+:)?(\w+)\b{_ATTRIBUTES}(/?)>")


def _own_targets_of_marked_segments_removed(text: str) -> str:
    """``text`` without the target of each segment nmt marked (``subState="nmt:mt"``): its
    own, a direct child, not a translation candidate's inside it, and the space before it."""
    out, at = [], 0
    stack: list[str] = []  # the open elements, a marked segment as "segment*"
    cut = -1  # where the target being removed starts
    for tag in _TAG.finditer(text):
        closing, name, empty = tag[1] == "/", tag[2], tag[3] == "/"
        if closing:
            stack = stack[:-1]
            if name == "target" and cut >= 0 and stack[-1:] == ["segment*"]:
                out.append(text[at:cut])
                at, cut = tag.end(), -1
        elif name == "target" and stack[-1:] == ["segment*"] and cut < 0:
            cut = len(text[:tag.start()].rstrip())
            if empty:
                out.append(text[at:cut])
                at, cut = tag.end(), -1
        if not closing and not empty:
            stack.append("segment*" if name == "segment" and 'subState="nmt:mt"' in tag[0]
                         else name)
    return "".join(out) + text[at:]


@settings(max_examples=120, deadline=None, suppress_health_check=FIXTURE)
@example([("insert bytes", 3685, b"]]>")], None, (shout_xml, "repair"))  # a ">" in a value
@given(st.lists(XLF2_MUTATIONS, max_size=3), st.sampled_from([None, b"earlier\n"]),
       st.sampled_from([(shout_xml, "repair"), (shout_xml, "strict"), (lose_spans, "repair")]))
def test_a_mutated_xliff2_file_is_filled_well_formed_or_refused_in_one_line(
        tmp_path: Path, edits: list[tuple[Any, ...]], previous: bytes | None,
        engine: tuple[Callable[[Sequence[str]], list[str]], str]) -> None:
    # the new targets, the empty ones they replace and the segments' start tags (where nmt
    # marks what it filled) aside, every byte as it was

    def rest(text: bytes) -> str:
        unfilled = _own_targets_of_marked_segments_removed(text.decode("utf-8"))
        return _SEGMENT_START.sub("<segment>", _NEW_OR_EMPTY_TARGET.sub("", unfilled))

    filled_well_formed_or_refused(tmp_path, mutated(XLF2, edits), previous, engine, rest)


# --- glossaries --------------------------------------------------------------------------------

GLOSSARY_LINES = st.lists(st.sampled_from(["Firefox", "  GNOME Shell  ", "", "# a comment",
                                           "C++", "Firefox", "x" * 201, "a\tb", "\ufeffBOM",
                                           "é", "\x85", "\u2028"]) | st.text(max_size=6),
                          max_size=8)


@st.composite
def glossary_bytes(draw: st.DrawFn) -> bytes:
    how = draw(st.sampled_from(["text", "crlf", "bom", "binary", "latin-1", "over"]))
    text = "\n".join(draw(GLOSSARY_LINES))
    if how == "binary":
        return draw(st.binary(max_size=64))
    if how == "over":
        return b"term\n" * (MAX_BYTES // 5 + 1)
    if how == "latin-1":
        return text.encode("latin-1", errors="replace") + b"\xe9"
    data = text.replace("\n", "\r\n" if how == "crlf" else "\n").encode("utf-8", "surrogatepass")
    return (b"\xef\xbb\xbf" if how == "bom" else b"") + data


def make_glossary(folder: Path, what: str, data: bytes) -> Path:
    path = folder / "terms.txt"
    if what == "file":
        path.write_bytes(data)
    elif what == "directory":
        path.mkdir()
    elif what == "fifo":
        os.mkfifo(path)
    elif what == "link to a directory":
        path.symlink_to(folder)
    elif what == "broken link":
        path.symlink_to(folder / "missing")
    elif what == "under a file":
        (folder / "file").write_bytes(data)
        return folder / "file" / "terms.txt"
    return path


@settings(max_examples=200, deadline=None, suppress_health_check=FIXTURE)
@given(st.sampled_from(["file"] * 5 + ["directory", "fifo", "missing", "link to a directory",
                                       "broken link", "under a file"]), glossary_bytes())
def test_a_glossary_is_read_as_documented_or_refused_in_one_line(tmp_path: Path, what: str,
                                                                 data: bytes) -> None:
    folder = tmp_path / "g"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    path = make_glossary(folder, what, data)
    try:
        chosen = rules("default", str(path), where="my.toml: data.glossary")
    except ConfigError as e:
        assert one_line(e).startswith(f"my.toml: data.glossary {path}")
        return
    text = data.decode("utf-8-sig")
    expected = tuple(dict.fromkeys(t.strip() for t in text.splitlines() if t.strip()))
    assert chosen.terms == expected and "terms" in chosen.kinds
    assert what == "file"
    for term in chosen.terms:  # each term is a span where it stands alone
        assert any(s.start == 2 for s in chosen.find(f"( {term} )")), term


# --- the command line --------------------------------------------------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=FIXTURE)
@given(st.lists(PO_MUTATIONS, min_size=1, max_size=3))
@example([("insert bytes", 10, b"\x00")])
@example([("charset", "rot13")])
def test_nmt_translate_refuses_a_bad_po_file_in_one_error_line(
        tmp_path: Path, edits: list[tuple[Any, ...]]) -> None:
    """Without a run to translate with, ``nmt translate`` refuses every file: a bad one for
    what it is (before a model is looked for), a good one for the missing run."""
    data = mutated(PO, edits)
    source, out = tmp_path / "in.po", tmp_path / "out.po"
    source.write_bytes(data)
    out.write_bytes(b"earlier\n")
    code, stdout, err = invoke("translate", "--run", str(tmp_path / "no-run"), "--input",
                               str(source), "--output", str(out))
    assert code != 0 and "Traceback" not in err
    assert err.startswith("error: ") and err.strip().count("\n") == 0, err
    assert out.read_bytes() == b"earlier\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".po")) == \
        ["in.po", "out.po"]


def test_the_error_of_a_bad_po_file_through_the_real_command_line(tmp_path: Path) -> None:
    import sys

    source, out = tmp_path / "in.po", tmp_path / "out.po"
    source.write_bytes(PO.replace("charset=UTF-8", "charset=rot13").encode("utf-8"))
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-m", "nmt", "translate", "--input", str(source),
                           "--output", str(out)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert re.fullmatch(rf"error: --input {re.escape(str(source))}: [^\n]*charset rot13[^\n]*\n",
                        done.stderr), done.stderr
    assert not out.exists()
