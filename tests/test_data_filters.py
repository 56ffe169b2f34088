"""Cleaning filters: each removes its own kind of noise and keeps clean pairs, in any script;
data.filters is parsed in one place; prepare counts and lists what they removed and never
filters the user's own held-out files."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nmt.config import DataConfig, load_config
from nmt.data.cache import REJECTED_FILE
from nmt.data.cleaning import suggested_max_words
from nmt.data.filters import (
    FILTERS,
    NO_VALUE,
    RATIO,
    SHARE,
    SHARE_EXCEEDED,
    first_failed,
    judged_spans,
    masked,
    parse,
    url,
)
from nmt.data.languages import CHARS_PER_WORD, language
from nmt.data.normalize import normalize
from nmt.data.prepare import prepare
from nmt.errors import ConfigError

EN, FR, RU, ZH, EL, DE = (language(c) for c in ("en", "fr", "ru", "zh", "el", "de"))
JA, TH, KO, AR, HE = (language(c) for c in ("ja", "th", "ko", "ar", "he"))
DEFAULT = parse("default")
SPANS = judged_spans("default")

# clean pairs from several scripts: no filter may remove any of them
CLEAN = [
    ("Go.", "Va !", EN, FR),
    ("I'm home.", "Je suis chez moi.", EN, FR),
    ("It costs 10,000 dollars.", "Ça coûte 10 000 dollars.", EN, FR),
    ("He said: \"Come here.\"", "Il a dit : « Viens ici. »", EN, FR),
    ("Call me at 3 (not 4).", "Appelle-moi à 3 (pas 4).", EN, FR),
    ("I'm drowning.", "Je suis en train de me noyer.", EN, FR),
    ("Where is the station?", "Где вокзал?", EN, RU),
    ("I have 2 cats.", "У меня 2 кошки.", EN, RU),
    ("I love you.", "我爱你。", EN, ZH),
    ("This is a long sentence about the weather in the mountains today.",
     "今天山里的天气是一个很长的句子。", EN, ZH),
    ("Good morning!", "Καλημέρα!", EN, EL),
    ("Hmm... OK.", "Hmm... d'accord.", EN, FR),
    ("She wrote „Hallo“ on the card.", "Elle a écrit « Hallo » sur la carte.", EN, FR),
    # a run of one character on both sides is the string's own: an underline, a template
    ("Upgrade Complete ----------------", "Mise à jour terminée --------------------", EN, FR),
    ("Use tmp.XXXXXXXXXX by default.", "Utiliser tmp.XXXXXXXXXX par défaut.", EN, FR),
]

# (the filter that must remove it, source, target, languages)
NOISY = [
    ("identical", "Tom.", "Tom.", EN, FR),
    ("identical", "Hello World", "hello  world", EN, FR),
    ("chars", "A" + " word" * 300, "Un" + " mot" * 300, EN, FR),
    ("ratio", "Yes.", "Oui, je pense que c'est vraiment une très bonne idée pour nous tous.",
     EN, FR),
    ("ratio", "Ok.", "好的，我觉得这是一个非常非常好的主意，我们明天一起去吧", EN, ZH),
    ("digits", "I was born in 1980.", "Je suis né en 1981.", EN, FR),
    ("digits", "Room 12.", "Chambre ١٣.", EN, FR),
    ("repeated_chars", "Nooooooooooooo!", "Non !", EN, FR),
    ("repeated_chars", "Wait..........", "Attendez !!!!!!!!!!", EN, FR),
    ("repeated_words", "no no no no no no", "non", EN, FR),
    ("repeated_words", "Go, go, go, go, go!", "Allez !", EN, FR),
    ("nonalnum", "<<<>>> ### ***", "Titre", EN, FR),
    ("nonalnum", ":-) ;-) :-(", "Sourire", EN, FR),
    ("brackets", "He left (without a word.", "Il est parti (sans un mot).", EN, FR),
    ("brackets", "She said \"yes.", "Elle a dit « oui ».", EN, FR),
    ("brackets", "Read this.", "Lis « ça.", EN, FR),
    ("url", "https://example.com/page?id=3", "https://example.com/page?id=3 .", EN, FR),
    ("url", "Contact: info@example.org", "info@example.org", EN, FR),
    ("url", "See /usr/share/doc/readme.txt", "/usr/share/doc/readme.txt", EN, FR),
    ("script", "Where is the station?", "Where is the station, please?", EN, RU),
    ("script", "Hello.", "Ola, como estas?", EN, EL),
    ("script", "I love you.", "I love you too.", EN, ZH),
]


def as_prepared(src: str, tgt: str, sl: object, tl: object) -> tuple[str, str]:
    """A pair as preparation hands it to the filters: each side normalised the demo's way."""
    return (normalize(src, False, "natural", lang=sl.code),  # type: ignore[attr-defined]
            normalize(tgt, False, "natural", lang=tl.code))  # type: ignore[attr-defined]


@pytest.mark.parametrize(("src", "tgt", "sl", "tl"), CLEAN)
def test_clean_pairs_pass_every_filter(src: str, tgt: str, sl: object, tl: object) -> None:
    s, t = as_prepared(src, tgt, sl, tl)
    assert first_failed(s, t, sl, tl, DEFAULT) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "src", "tgt", "sl", "tl"), NOISY,
                         ids=[f"{n[0]}-{i}" for i, n in enumerate(NOISY)])
def test_each_filter_removes_its_own_kind(name: str, src: str, tgt: str, sl: object,
                                          tl: object) -> None:
    s, t = as_prepared(src, tgt, sl, tl)
    check = FILTERS[name].check
    assert check(s, t, sl, tl, FILTERS[name].default)  # type: ignore[arg-type]
    # and alone, the pair is removed under its own name
    assert first_failed(s, t, sl, tl, {name: FILTERS[name].default}) == name  # type: ignore


def test_every_filter_has_a_noisy_example() -> None:
    assert {n for n, *_ in NOISY} == set(FILTERS)


# software strings of several formats, correctly translated: (source, target, languages, the
# filter that removes the pair when it reads the spans as text, None: none does). nonalnum,
# brackets, digits and script no longer remove any of them even so: the symbols of usage lines,
# placeholders and named brackets are carried over by the translation, which nonalnum and
# brackets ask; the positions of %2$s and %1$s are numbers under 10 on one side, which digits
# lets pass; an address's words are on both sides, which script leaves out.
SOFTWARE = [
    # gettext C: reordered, quoted, doubled, glued placeholders, date formats
    ("--%s argument %s too large", "Argument %2$s für Option --%1$s zu groß", EN, DE, None),
    ("%1$s of %2$s", "%2$s : %1$s", EN, FR, None),
    ("Cannot open `%s'", "Kann »%s« nicht öffnen", EN, DE, None),
    ("%s/%s", "%s/%s", EN, FR, "identical"),  # nothing to translate: removed either way
    ("%s%s%s%s%s", "%s%s%s%s%s", EN, DE, "identical"),
    ("%s-%s-%s %s:%s", "%s.%s.%s %s:%s", EN, DE, "repeated_words"),
    ("Date: %a %b %d %Y", "Date : %a %d %b %Y", EN, FR, None),
    ("%a %b %d %Y", "%a, %d. %b %Y", EN, DE, None),
    ("%s of %s (%d%%)", "%s de %s (%d %%)", EN, FR, None),
    # Python and ICU
    ("%(name)s is %(age)d years old", "%(name)s ist %(age)d Jahre alt", EN, DE, None),
    ("{0}-{1} of {2}", "{0}–{1} von {2}", EN, DE, None),
    ("{count, plural, one {# file} other {# files}} copied",
     "{count, plural, one {# Datei} other {# Dateien}} kopiert", EN, DE, None),
    ("Step {1} of {2}", "Étape {1} sur {2}", EN, FR, None),
    ("Step {1} of {2}", "Schritt {1} von {2}", EN, DE, None),
    # shell and templates
    ("${HOME}/.config not found", "${HOME}/.config introuvable", EN, FR, None),
    ("Hello {{ user.name }}!", "Hallo {{ user.name }}!", EN, DE, None),
    # HTML
    ("<b>%s</b>: %d new", "<b>%s</b> : %d nouveaux", EN, FR, None),
    ("Click <a href=\"%s\">here</a>.", "Klicken Sie <a href=\"%s\">hier</a>.", EN, DE, None),
    # --help lines, options and paths
    ("-v, --verbose  explain what is being done", "-v, --verbose  explique ce qui est fait",
     EN, FR, None),
    ("Try '%s --help' for more information.", "»%s --help« gibt weitere Informationen aus.",
     EN, DE, None),
    ("See https://example.org/documentation/installation",
     "См. https://example.org/documentation/installation", EN, RU, None),
    # words joined by a slash are no path (the url filter removed them before it asked spans)
    ("Install/Remove", "Installieren/Entfernen", EN, DE, None),
    ("n/a", "k.A.", EN, DE, None),
    ("input/output error", "Ein-/Ausgabefehler", EN, DE, None),
    ("Map/Scenario Editor", "Karten-/Szenarioeditor", EN, DE, None),
    ("Read/Write", "Lecture/Écriture", EN, FR, None),
    # usage lines and prompts: symbols the translation carries over (Debian's catalogues)
    ("[Y/n]", "[O/n]", EN, FR, None),
    ("[FILE...]", "[FICHIER...]", EN, FR, None),
    ("cd [-L|[-P [-e]] [-@]] [dir]", "cd [-L|[-P [-e]] [-@]] [rép]", EN, FR, None),
    ("need --%s, --%s or --%s", "requiert --%s, --%s ou --%s", EN, FR, None),
    ("--- No Tip ---", "--- Pas de conseil du jour ---", EN, FR, None),
    # messages that name a bracket or stop where the program goes on: unpaired alike
    ("`)' expected", "« ) » attendue", EN, FR, None),
    ("unexpected token `%s', expected `)'", "symbole inattendu « %s » au lieu de « ) »",
     EN, FR, None),
    ("%s: first non-whitespace character is not `\"'",
     "%s : le premier caractère non vide n'est pas « \" »", EN, FR, None),
    ("Unmatched ) or \\)", ") ou \\) sans vis-à-vis", EN, FR, None),
    ("(Reading database ...", "(Lecture de la base de données...", EN, FR, None),
]


# strings of Debian's catalogues in scripts other than Latin, correctly translated: each was
# removed by a default filter that counted a Japanese character as a word (ratio), a name the
# translation carries over as a word in the wrong script (script) or a number written out on
# one side as a different number (digits)
OTHER_SCRIPTS = [
    ("cannot get section header", "セクションヘッダーを取得できません", EN, JA, "ratio"),
    ("PAM authentication failed for user \"%s\"", "ユーザー\"%s\"のPAM認証に失敗しました", EN, JA,
     "ratio"),
    ("Failed to write header", "เขียนข้อมูลส่วนหัวไม่สำเร็จ", EN, TH, "ratio"),
    ("Amiga SoundTracker audio", "Amiga SoundTracker 音频", EN, ZH, "ratio"),
    ("Key ID", "キー ID", EN, JA, "script"),
    ("SVG image", "SVG 画像", EN, JA, "script"),
    ("RPC failed; %s", "RPC 失败。%s", EN, ZH, "script"),
    ("KP_Delete", "키패드 Delete", EN, KO, "script"),
    ("Adobe FrameMaker font", "Шрифт Adobe FrameMaker", EN, RU, "script"),
    ("Windows BMP image", "صورة Windows BMP", EN, AR, "script"),
    ("NullSoft video", "Βίντεο Nullsoft", EN, EL, "script"),
    ("array must be one-dimensional", "配列は1次元でなければなりません", EN, JA, "ratio"),
    ("3rd level of Left Ctrl", "第三层的左 Ctrl", EN, ZH, "digits"),
    ("transfer rate must be greater than zero", "скорость передачи должна быть больше 0", EN,
     RU, "digits"),
    ("October", "10月", EN, JA, "digits"),
    ("I paid five dollars to him.", "Je lui ai payé 5 dollars.", EN, FR, "digits"),
]


@pytest.mark.parametrize(("src", "tgt", "sl", "tl", "removed_by"), OTHER_SCRIPTS,
                         ids=[f"{n[0]}>{n[1]}" for n in OTHER_SCRIPTS])
def test_translations_into_other_scripts_pass_the_filters(
        src: str, tgt: str, sl: object, tl: object, removed_by: str) -> None:
    s, t = as_prepared(src, tgt, sl, tl)
    assert first_failed(s, t, sl, tl, DEFAULT, SPANS) is None  # type: ignore[arg-type]


# what they still remove in those scripts (from the same catalogues): a different string, a
# different number, a key in place of its text
OTHER_SCRIPTS_NOISY = [
    ("script", "Invalid compressed data", "Invalid hostname", EN, HE),
    ("script", "Splice not supported", "Symbolic links not supported", EN, HE),
    ("digits", "libc6 library %s in wrong directory", "libc5 的库 %s 处于错误的目录中", EN, ZH),
    ("digits", "Greek, Ancient (to 1453)", "Ελληνικά, Αρχαία", EN, EL),
    ("digits", "I have 2 cats.", "J'ai 3 chats.", EN, FR),
    ("ratio", "Ok.", "好的，我觉得这是一个非常非常好的主意，"
     "我们明天一起去吧，好不好呢朋友们大家一起来", EN, ZH),
    ("ratio", "Close the window", "ウィンドウを閉じる前に、保存されていない"
     "すべての変更を保存するかどうかを確認してください。"
     "変更は失われます。本当によろしいですか", EN, JA),
]


def test_words_of_a_script_without_spaces_are_its_characters_over_a_words_length() -> None:
    assert EN.words("PAM authentication failed for user \"x\" !") == 6  # "!" is no word
    # 14 Japanese characters over 3.0 a word, and PAM and s one word each
    assert JA.words("ユーザー\"%s\"のPAM認証に失敗しました") == pytest.approx(14 / 3 + 2)
    assert ZH.words("右 Win 选择第五层") == pytest.approx(6 / 1.7 + 1)
    assert JA.words("") == 0 and JA.words("。、！") == 0


_CYRILLIC = st.text(alphabet="абвгдежзиклмнопрстуфхцчшщыэюя", min_size=2, max_size=10)
_NAME = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", min_size=2,
                max_size=12)


@settings(max_examples=200, deadline=None)
@given(words=st.lists(_NAME, min_size=1, max_size=6), own=st.lists(_CYRILLIC, min_size=1,
       max_size=6), names=st.lists(_NAME, min_size=0, max_size=6), order=st.randoms())
def test_names_a_translation_carries_over_never_count_against_its_script(
        words: list[str], own: list[str], names: list[str], order: object) -> None:
    """A Russian side of its own words and any number of names the English side has, in any
    order, is never removed by script; the same side with those names not in the source is."""
    tgt = own + names
    order.shuffle(tgt)  # type: ignore[attr-defined]
    src, t = " ".join(words + names), " ".join(tgt)
    assert FILTERS["script"].check(src, t, EN, RU, 0.5) is False
    foreign = sum(len(n) for n in names)
    if foreign > 2 * sum(len(w) for w in own) and not set(names) & set(words):
        assert FILTERS["script"].check(" ".join(words), t, EN, RU, 0.5) is True


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 40), lang=st.sampled_from(["ja", "zh", "th", "my"]),
       carried=st.integers(0, 3))
def test_a_translation_as_long_as_its_source_in_any_script_is_no_ratio_outlier(
        n: int, lang: str, carried: int) -> None:
    """n English words and their translation of n words' worth of characters of a script
    without spaces (names carried over among them) are as long as each other; four times that
    many characters is an outlier once it is over the floor."""
    target = language(lang)
    char = {"ja": "語", "zh": "语", "th": "ก", "my": "က"}[lang]
    per_word = CHARS_PER_WORD[target.script]
    names = ["Win"] * min(carried, n)
    src = " ".join(["word"] * (n - len(names)) + names)
    tgt = char * round(per_word * (n - len(names))) + " " + " ".join(names)
    assert FILTERS["ratio"].check(src, tgt, EN, target, 3.0) is False
    assert FILTERS["ratio"].check(tgt, src, target, EN, 3.0) is False
    if n >= 3:  # 12 words or more: over the floor of 8
        longer = char * round(4 * per_word * n)
        assert FILTERS["ratio"].check(src, longer, EN, target, 3.0) is True


@pytest.mark.parametrize(("src", "tgt", "sl", "tl", "before"), SOFTWARE,
                         ids=[f"{n[0]}>{n[1]}" for n in SOFTWARE])
def test_no_filter_removes_a_pair_only_because_of_its_spans(
        src: str, tgt: str, sl: object, tl: object, before: str | None) -> None:
    s, t = as_prepared(src, tgt, sl, tl)
    expected = "identical" if before == "identical" else None
    assert first_failed(s, t, sl, tl, DEFAULT, SPANS) == expected  # type: ignore[arg-type]
    # what the filters did when they read the spans as text: the pairs above would fail
    assert first_failed(s, t, sl, tl, DEFAULT) == before  # type: ignore[arg-type]


# pairs with spans that are genuinely bad: still removed
SOFTWARE_NOISY = [
    ("url", "See https://example.org/help", "Siehe die Hilfe.", EN, DE),
    ("url", "Write to bugs@example.org.", "Écrivez-nous.", EN, FR),
    ("url", "https://example.org/help", "https://example.org/hilfe", EN, DE),
    ("url", "Open ~/.config/nmt/config.toml", "~/.config/nmt/config.toml", EN, FR),
    ("digits", "Copied %d files in 3 seconds.", "%d Dateien in 5 Sekunden kopiert.", EN, DE),
    ("digits", "%1$s of %2$s (page 2)", "%2$s : %1$s (page 3)", EN, FR),
    ("brackets", "Open the file (%s", "Datei öffnen (%s)", EN, DE),
    ("brackets", "<not-found>", "<pas-trouvé>)", EN, FR),  # a bracket the translation added
    ("brackets", "--quiet Suppress \"no symbols\" diagnostic",
     "--quiet Supprimer le diagnostique « pas de symboles n", EN, FR),  # a cut translation
    ("nonalnum", "%s <<<>>> ### ***", "%s Titre", EN, FR),
    ("nonalnum", "==> %s <==", "%s", EN, FR),  # the arrows dropped
    ("identical", "%s", "%s", EN, FR),
    ("identical", "--force", "--force", EN, DE),
    ("repeated_words", "yes yes yes yes yes %s", "oui %s", EN, FR),
    ("script", "Open %s now", "Open %s now, please", EN, RU),
]


@pytest.mark.parametrize(("name", "src", "tgt", "sl", "tl"), SOFTWARE_NOISY + OTHER_SCRIPTS_NOISY,
                         ids=[f"{n[0]}-{i}" for i, n in enumerate(SOFTWARE_NOISY
                                                                  + OTHER_SCRIPTS_NOISY)])
def test_bad_pairs_with_spans_or_in_other_scripts_are_still_removed(
        name: str, src: str, tgt: str, sl: object, tl: object) -> None:
    s, t = as_prepared(src, tgt, sl, tl)
    assert first_failed(s, t, sl, tl, DEFAULT, SPANS) == name  # type: ignore[arg-type]


@pytest.mark.parametrize(("src", "tgt", "target"), [
    ("File not found.", "Datoteka nije pronađena.", "sr-Latn"),  # gettext's sr@latin
    ("File not found.", "Датотека није пронађена.", "sr"),
    ("Open the file", "Файлни очиш", "uz-Cyrl"),
    ("Save the file", "儲存檔案", "zh-Hant"),
])
def test_a_language_written_in_another_script_is_named_with_it(src: str, tgt: str,
                                                               target: str) -> None:
    """``sr-Latn`` is Serbian whose ``script`` filter wants Latin letters: the Latin
    translations of a Serbian catalogue of ``sr@latin`` were all removed as not Serbian."""
    en, tl = language("en"), language(target)
    s, t = as_prepared(src, tgt, en, tl)
    assert first_failed(s, t, en, tl, DEFAULT, SPANS) is None  # type: ignore[arg-type]
    usual = language(target.partition("-")[0])
    if usual.script != tl.script:  # the same text, the language's usual script wanted
        assert first_failed(s, t, en, usual, DEFAULT, SPANS) == "script"  # type: ignore[arg-type]


def test_words_joined_by_a_slash_are_no_address() -> None:
    for words in ("Install/Remove", "n/a", "input/output error", "and/or", "km/h",
                  "Map/Scenario Editor", "TCP/IP"):
        assert not url(words, words.upper(), EN, DE, 1), words
    for address in ("/usr/share/doc", "docs/DATA.md", "C:\\Users\\x.txt", "www.example.org",
                    "bugs@example.org", "https://example.org/a?b=1"):
        assert url(address, "Adresse", EN, FR, 1), address


def test_the_filters_read_each_span_as_a_plain_word_of_its_own() -> None:
    """Letters (no symbol, no digit), a different word for each span, none of a script."""
    text = masked("%1$s %2$s <b>%d</b> --force {0}", SPANS)
    words = text.split()
    assert len(words) == 5 and len(set(words)) == 5 and "".join(words).isalpha()
    assert masked("Tom has 3 cats.", SPANS) == "Tom has 3 cats."
    assert masked("%s", judged_spans("none")) == "%s"  # data.spans = "none": nothing is a span
    assert [masked(f"{'%s ' * n}x", SPANS).count(" ") for n in (30, 800)] == [30, 800]
    many = masked("%s " * 800, SPANS).split()
    assert len(set(many)) == 800


def test_terms_are_words_to_the_filters() -> None:
    assert judged_spans("default,terms") == judged_spans("default")


@settings(max_examples=300, deadline=None)
@given(src=st.text(max_size=80), tgt=st.text(max_size=80),
       pair=st.sampled_from([(EN, FR), (EN, RU), (EN, ZH), (EL, EN)]))
def test_filters_answer_any_text(src: str, tgt: str, pair: tuple) -> None:
    """Any text, any script, control characters and lone surrogates included: a yes or a no,
    never an exception."""
    for name, f in FILTERS.items():
        assert f.check(src, tgt, *pair, f.default) in (True, False), name


def test_parse_chooses_and_orders_filters() -> None:
    assert list(parse("default")) == list(FILTERS)
    assert parse("none") == {}
    assert parse("default,ratio=2.5,-digits") == {
        **{n: f.default for n, f in FILTERS.items() if n != "digits"}, "ratio": 2.5}
    assert parse("url,identical") == {"identical": 1, "url": 1}  # in FILTERS' order


@pytest.mark.parametrize(("spec", "says"), [
    ("bogus", "unknown filter 'bogus'"), ("ratio=x", "expected ratio=N, N a ratio >= 1"),
    ("ratio=-1", "a ratio >= 1"), ("ratio=inf", "a ratio >= 1"), ("ratio=nan", "a ratio >= 1"),
    ("identical,default", "may only come first"), ("-ratio=3", "takes no value"),
    # values that cannot mean anything: a share above 1, a count of 1, a ratio below 1
    ("script=5", "expected script=N, N a share, 0 < N <= 1"),
    ("nonalnum=7", "expected nonalnum=N, N a share, 0 < N < 1"),
    ("nonalnum=1", "0 < N < 1"),  # more than the whole side: never
    ("repeated_chars=1", "expected repeated_chars=N, N a count, a whole number from 2 to "),
    ("repeated_words=2.5", "a whole number from 2"), ("chars=0", "a whole number from 2"),
    ("ratio=0.001", "expected ratio=N, N a ratio >= 1"),
    ("identical=3", "identical takes no value"), ("url=0.5", "url takes no value"),
])
def test_a_bad_filter_list_is_one_line_naming_the_key(spec: str, says: str,
                                                      tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"data\.filters: .*" + says.replace("(", r"\(")):
        load_config(None, [f"data.filters={spec}"])
    path = tmp_path / "c.toml"
    path.write_text(f'[data]\nfilters = ["default", "{spec}"]\n')
    with pytest.raises(ConfigError, match=r"c\.toml: data\.filters"):
        load_config(path)


@given(name=st.sampled_from(sorted(FILTERS)),
       value=st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                       st.sampled_from([0, 1, 2, 0.5, 1e-300, 1.0000001, 0.9999999, 2**31 - 1,
                                        2**31, -1, 3.5])))
@settings(max_examples=300, deadline=None)
def test_every_filter_value_is_in_its_range_or_one_line(name: str, value: float) -> None:
    """Any value of any filter: refused in one line naming the filter and its range, or within
    the range of what its parameter is (a share, a ratio, a count), where it means something."""
    kind = FILTERS[name].kind
    try:
        chosen = parse(f"{name}={value!r}")
    except ValueError as e:
        assert "\n" not in str(e) and name in str(e)
        if kind is not NO_VALUE:
            assert kind.expected() in str(e)
        return
    assert kind is not NO_VALUE
    assert chosen[name] == value
    if kind in (SHARE, SHARE_EXCEEDED):
        assert 0 < value <= 1 and (kind is SHARE or value < 1)
    elif kind is RATIO:
        assert 1 <= value < float("inf")
    else:
        assert value == int(value) and 2 <= value <= 2**31 - 1


def test_a_toml_list_of_filters_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[data]\nfilters = ["default", "ratio=2", "-url"]\n')
    assert load_config(path).data.filters == "default,ratio=2,-url"


def test_a_run_saved_before_filters_keeps_none(tmp_path: Path) -> None:
    """A run's config written before data.filters existed resumes and scores on the data it
    was trained on: no filter ran then."""
    path = tmp_path / "config.toml"
    path.write_text('[data]\nsource = "en"\n')
    assert load_config(path, saved=True).data.filters == "none"
    assert load_config(path).data.filters == "default"  # a user's own config: the default


def write_aligned(prefix: Path, pairs: list[tuple[str, str]], src: str, tgt: str) -> None:
    prefix.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{prefix}.{src}").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    Path(f"{prefix}.{tgt}").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")


def noisy_corpus(n_clean: int = 300) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """Clean English-French pairs with every kind of noise mixed in, and how many of each."""
    clean = [(f"I have {i} red apples and {i + 1} green ones.",
              f"J'ai {i} pommes rouges et {i + 1} vertes.") for i in range(n_clean)]
    noise = {
        "identical": [(f"Paris {i} Texas", f"Paris {i} Texas") for i in range(3)],
        "ratio": [("Yes indeed.", "Oui, je pense vraiment que c'est une " + "très " * (i + 1)
                   + "bonne idée pour nous tous.") for i in range(4)],
        "digits": [(f"Room {i}.", f"Chambre {i + 1}.") for i in range(5)],
        "repeated_chars": [(f"Hello{'!' * 12} {i}", f"Salut ! {i}") for i in range(2)],
        "url": [(f"https://example.com/{i}", f"https://example.com/{i}/fr") for i in range(3)],
        "brackets": [(f"He left (at {i}.", f"Il est parti (à {i}).") for i in range(2)],
    }
    pairs = clean + [p for kind in noise.values() for p in kind]
    pairs += clean[:7]  # duplicates
    return pairs, {k: len(v) for k, v in noise.items()}


def test_prepare_counts_and_lists_what_each_filter_removed(tmp_path: Path) -> None:
    pairs, expected = noisy_corpus()
    write_aligned(tmp_path / "corpus" / "train", pairs, "en", "fr")
    cfg = DataConfig(corpus=str(tmp_path / "corpus" / "train"), vocab_size=60,
                     valid_frac=0.05, test_frac=0.05)
    messages: list[str] = []
    p = prepare(cfg, tmp_path / "data", log=messages.append)
    removed = {k: v for k, v in p.meta["filtered"].items() if v}
    assert removed == expected
    counts = p.meta["counts"]
    assert counts["filtered"] == sum(expected.values()) and counts["duplicates"] == 7
    assert counts["kept"] == 300
    total = sum(expected.values())
    assert any(m.startswith(f"data.filters removed {total} pairs") for m in messages)
    rows = (p.cache_dir / REJECTED_FILE).read_text(encoding="utf-8").splitlines()
    assert rows[0] == "filter\tsource\ttarget" and len(rows) == 1 + sum(expected.values())
    assert sorted({r.split("\t")[0] for r in rows[1:]}) == sorted(expected)
    assert all(len(r.split("\t")) == 3 for r in rows)
    kept = {s for split in p.splits.values() for s in split.src_text}
    assert not any(s.startswith("https://") or "(at" in s for s in kept)
    # off: every pair but the duplicates is kept, and the cache is another one
    off = prepare(dataclasses.replace(cfg, filters="none"), tmp_path / "data", log=lambda m: None)
    assert off.meta["counts"]["kept"] == 300 + sum(expected.values())
    assert off.cache_dir != p.cache_dir and not any(off.meta["filtered"].values())


def test_filters_never_touch_the_users_held_out_files(tmp_path: Path) -> None:
    pairs, _ = noisy_corpus()
    write_aligned(tmp_path / "c" / "train", pairs, "en", "fr")
    held = [("Room 1.", "Chambre 2."), ("https://example.com", "https://example.com"),
            ("Good night.", "Bonne nuit.")]
    write_aligned(tmp_path / "c" / "test", held, "en", "fr")
    cfg = DataConfig(corpus=str(tmp_path / "c" / "train"), test=str(tmp_path / "c" / "test"),
                     vocab_size=60, valid_frac=0.05, test_frac=0.0)
    p = prepare(cfg, tmp_path / "data", log=lambda m: None)
    assert p.splits["test"].src_text == [s for s, _ in held]


def test_the_suggested_limit_keeps_99_percent() -> None:
    longest = {3: 50, 10: 49, 80: 1}  # words of the longer side -> pairs
    assert suggested_max_words(longest) == 10
    assert suggested_max_words(longest, keep=1.0) == 80
    assert suggested_max_words({}) == 0


def test_pairs_judged_in_worker_processes_are_those_judged_here(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """nmt/data/parallel_pairs.py's trick changes nothing: the pairs, references, counts, the
    removals by filter and language, the rejected pairs and the lengths are the one-process
    path's, on a corpus large enough to start the workers."""
    import nmt.data.parallel_pairs as parallel
    from nmt.data.cache import REJECTED_FILE, RejectedWriter
    from nmt.data.cleaning import read_pairs
    from nmt.data.corpora import open_data
    from nmt.data.spool import PairSpool

    pairs, _ = noisy_corpus(n_clean=1500)
    stray = [("I don't know where he lives now, my friend.",
              "Ich weiß nicht, wo er jetzt wohnt, mein Freund.")] * 40
    spanned = [(f"--%s argument %s too large ({i})", f"argument %2$s de --%1$s trop grand ({i})")
               for i in range(200)]  # kept only because the filters mask the spans
    write_aligned(tmp_path / "c" / "train", pairs + stray + spanned + pairs[:300], "en", "fr")
    cfg = DataConfig(corpus=str(tmp_path / "c" / "train"), vocab_size=60)
    corpus = open_data(cfg, tmp_path / "data", log=lambda m: None).corpus
    monkeypatch.setattr(parallel, "SERIAL_PAIRS", 100)
    monkeypatch.setattr(parallel, "CHUNK", 256)
    spools, rejected = [], []
    for workers in (1, 2):
        spools.append(PairSpool(tmp_path / f"spool{workers}"))
        (tmp_path / f"rejected{workers}").mkdir()
        rejected.append(RejectedWriter(tmp_path / f"rejected{workers}"))
        cleaned = read_pairs(corpus, cfg, spools[-1], rejected=rejected[-1],
                             log=lambda m: None, workers=workers)
        rejected[-1].close()
        if workers == 1:
            here = cleaned
    there = cleaned
    assert here == there
    one, two = (list(s.read(i for c in s.indices() for i in c.tolist())) for s in spools)
    assert one == two and len(one) == here.counts["kept"]
    assert (tmp_path / "rejected1" / REJECTED_FILE).read_text() == (
        tmp_path / "rejected2" / REJECTED_FILE).read_text()
    assert here.filtered["langid_target"] == 40 and here.counts["duplicates"] > 300
    assert sum(s.startswith("--%s argument") for s, _, _ in one) == 200


def test_files_swapped_in_a_pair_of_two_scripts_are_an_error_that_says_so(
        tmp_path: Path) -> None:
    """English in the .ru file and Russian in the .en file: the script filter removes every
    pair before the language check sees one, so the error says which filter, and why."""
    from nmt.errors import DataError

    rows = [(f"Я вижу дом номер {i}.", f"I see house number {i}.") for i in range(300)]
    write_aligned(tmp_path / "c" / "train", rows, "en", "ru")
    cfg = DataConfig(corpus=str(tmp_path / "c" / "train"), source="en", target="ru",
                     vocab_size=60)
    with pytest.raises(DataError, match=r"train\.en, .*train\.ru: no usable en-ru pairs in 300 "
                                        r"read .*most by script: 300 .*are the files swapped"):
        prepare(cfg, tmp_path / "data", log=lambda m: None)
