"""Translation memories (nmt/data/corpora/tmx.py): the same pairs as a TMX file build the same
arrays as aligned files; inline codes read as the native code they hold; languages matched by
tag; and a mutated or hostile file gives pairs or a one-line error, in bounded memory."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_corpora import CFG, pairs, quiet, same_arrays, write_aligned
from test_reliability_structure import mutated, mutations

from nmt.data.corpora import tmx, xml_units
from nmt.data.languages import LANGUAGES, same_language
from nmt.data.prepare import prepare
from nmt.errors import DataError

HEAD = '''<?xml version="1.0" encoding="{encoding}"?>
<!DOCTYPE tmx SYSTEM "tmx14.dtd">
<tmx version="1.4">
  <header creationtool="a CAT tool" creationtoolversion="1" datatype="plaintext"
          segtype="sentence" adminlang="en-US" srclang="en-US" o-tmf="x"/>
  <body>
'''


def memory(units: list[list[tuple[str, str]]], encoding: str = "UTF-8") -> str:
    """A TMX document of ``units``, each a list of (language tag, segment markup)."""
    body = "".join("    <tu>\n" + "".join(f'      <tuv xml:lang="{lang}"><seg>{seg}</seg></tuv>\n'
                                          for lang, seg in unit) + "    </tu>\n"
                   for unit in units)
    return HEAD.format(encoding=encoding) + body + "  </body>\n</tmx>\n"


def read(text: str | bytes, source: str = "en", target: str = "fr",
         log: Callable[[str], None] = quiet) -> list[tuple[str, str]]:
    data = text.encode("utf-8") if isinstance(text, str) else text

    def open_() -> Any:
        import io
        return io.BytesIO(data)

    return list(tmx.read_pairs(open_, "memory.tmx", source, target, log))


def test_a_memory_builds_the_arrays_its_pairs_do_as_aligned_files(tiny_data_dir: Path,
                                                                  tmp_path: Path) -> None:
    """UTF-16 with its byte-order mark and a DOCTYPE, as CAT tools write it; French first in
    each unit, regional tags, and a unit without French, skipped and said."""
    rows = pairs()
    write_aligned(tmp_path / "mine" / "train", rows)
    aligned = prepare(dataclasses.replace(CFG, corpus=str(tmp_path / "mine" / "train")),
                      tiny_data_dir, log=quiet)
    units = [[("fr-FR", escape(fr)), ("EN-us", escape(en))] for en, fr in rows]
    units.insert(3, [("en-US", "Only English."), ("de-DE", "Nur Deutsch.")])
    path = tmp_path / "memory.tmx"
    path.write_bytes(memory(units, "UTF-16").encode("utf-16"))
    said: list[str] = []
    from_tmx = prepare(dataclasses.replace(CFG, corpus=str(path)), tiny_data_dir,
                       log=said.append)
    same_arrays(aligned, from_tmx)
    assert from_tmx.identity["corpus"]["form"] == "tmx"
    assert f"warning: {path}: 1 of {len(rows) + 1:,} translation units lack 'en' or 'fr': " \
        "skipped" in said


def test_segments_read_as_the_application_shows_them() -> None:
    units = [
        [("en", 'Click <bpt i="1" x="1">&lt;b class="x"&gt;</bpt>here<ept i="1">&lt;/b&gt;'
                "</ept> now"),
         ("fr", 'Cliquez <bpt i="1">&lt;b class="x"&gt;</bpt>ici<ept i="1">&lt;/b&gt;</ept>')],
        [("en", 'Hello <ph x="1">{0}</ph>, <hi type="b">welcome</hi>'),
         ("fr", 'Bonjour <ph x="1">{0}</ph>, <hi>bienvenue</hi>')],
        [("en", "Two\n   lines"), ("fr", "Deux\r\nlignes"), ("fr", "not this one")],
        [("en", '<ph>&lt;img alt="<sub>A cat</sub>"&gt;</ph> Tom &amp; Jerry'),
         ("fr", '<it pos="begin">&lt;i&gt;</it>Tom et Jerry')],
    ]
    assert read(memory(units)) == [
        ('Click <b class="x">here</b> now', 'Cliquez <b class="x">ici</b>'),
        ("Hello {0}, welcome", "Bonjour {0}, bienvenue"),
        ("Two    lines", "Deux lignes"),  # a break a space, the spaces after it kept
        ('<img alt="A cat"> Tom & Jerry', "<i>Tom et Jerry"),
    ]


@pytest.mark.parametrize(("tag", "code", "expected"), [
    ("en-US", "en", True), ("EN_gb", "en", True), ("en", "en", True), ("eng", "en", False),
    ("pt-BR", "pt-BR", True), ("pt-PT", "pt-BR", False), ("pt", "pt-BR", False),
    ("zh-Hans-CN", "zh", True), ("", "en", False), (" fr ", "fr", True),
    ("pt-Latn-BR", "pt-BR", True), ("zh-Hant-TW", "zh-TW", True), ("zh-Hans", "zh-TW", False),
    # gettext locales: a modifier is a subtag, a script's name its ISO 15924 code
    ("sr@latin", "sr", True), ("sr_RS@latin", "sr-Latn", True), ("sr", "sr-Latn", False),
    ("sr@cyrillic", "sr-Latn", False), ("ca@valencia", "ca", True), ("de_DE.UTF-8", "de", True),
    ("@latin", "sr", False),
])
def test_language_tags(tag: str, code: str, expected: bool) -> None:
    assert same_language(tag, code) is expected


@given(st.sampled_from(sorted(LANGUAGES)), st.sampled_from(["", "-Latn", "-Cyrl", "-Hant"]),
       st.sampled_from(["", "-US", "_BR", "-419"]), st.sampled_from(["", ".UTF-8"]),
       st.sampled_from(["", "@euro"]), st.sampled_from(["lower", "upper", "as is"]),
       st.sampled_from(["-", "_"]))
def test_a_tag_names_the_language_of_its_code_whatever_else_it_says(
        code: str, script: str, region: str, codeset: str, modifier: str, case: str,
        dash: str) -> None:
    """A tag is the language of a code when it names the code's language and every subtag the
    code has, written in any case, with ``-`` or ``_``, with a region, a locale's codeset or
    modifier besides; never the language of another code, nor of the code with a script the
    tag does not name."""
    written = (code + script + region).replace("-", dash).replace("_", dash) + codeset + modifier
    tag = {"lower": written.lower(), "upper": written.upper(), "as is": written}[case]
    assert same_language(tag, code) and same_language(tag, code + script)
    assert not same_language(tag, "xx") and not same_language(tag, code + "-Arab")
    assert same_language(code, tag) is (not (script or region or modifier))
    other = next(c for c in sorted(LANGUAGES) if c != code)
    assert not same_language(tag, other)


def test_either_direction_and_tmx_1_1_lang() -> None:
    text = memory([[("en", "Go."), ("fr", "Va !")]]).replace("xml:lang", "lang")
    assert read(text) == [("Go.", "Va !")]
    assert read(text, "fr", "en") == [("Va !", "Go.")]


BILLION_LAUGHS = '''<?xml version="1.0"?>
<!DOCTYPE tmx [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>
<tmx version="1.4"><body><tu><tuv xml:lang="en"><seg>&b;</seg></tuv></tu></body></tmx>
'''


@pytest.mark.parametrize(("text", "message"), [
    (BILLION_LAUGHS, "memory.tmx: an entity declaration; a translation memory (TMX) needs "
                    "none"),
    ('<!DOCTYPE tmx SYSTEM "http://example.org/x.dtd"><tmx><body><tu><tuv xml:lang="en">'
     "<seg>&ext;</seg></tuv></tu></body></tmx>", "memory.tmx: the entity &ext; of a DTD, "
     "which nmt does not read"),
    (memory([[("en", "a"), ("fr", "b")]]).replace("</tu>", "</tuv>", 1),
     "memory.tmx: line 10: not well-formed XML (mismatched tag)"),
    ("<xliff><file/></xliff>", "memory.tmx: not a TMX document (its root is <xliff>)"),
    ("", "memory.tmx: line 1: not well-formed XML (no element found)"),
    (memory([[("en-US", "a"), ("de", "b")], [("es", "c")]]),
     "memory.tmx: no translation unit holds both 'en' and 'fr' (its languages: en-US, de, es)"),
])
def test_bad_memories_are_one_line(text: str, message: str) -> None:
    with pytest.raises(DataError) as e:
        read(text)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_memory_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A segment longer than the bound is read as empty and said once; a run of bytes with no
    ``>`` longer than it is refused before the parser holds it."""
    for module in (tmx, xml_units):
        monkeypatch.setattr(module, "MAX_LINE_BYTES", 1000)
    monkeypatch.setattr(xml_units, "PIECE", 256)
    said: list[str] = []
    long = "x" * 600 + "<hi>" + "y" * 600 + "</hi>"
    text = memory([[("en", "a"), ("fr", "b")], [("en", long), ("fr", "c")],
                   [("en", "d"), ("fr", long)]])
    assert read(text, log=said.append) == [("a", "b"), ("", "c"), ("d", "")]
    assert said == ["warning: memory.tmx: 2 segments longer than 0 MiB (first: line 12) read "
                    "as empty: their pairs are dropped"]
    with pytest.raises(DataError, match=r"memory.tmx: line \d+: more than 0 MiB without a '>'"):
        read(memory([[("en", "z" * 2000), ("fr", "b")]]))


TMX = memory([[("en-US", "Open %s?"), ("fr-FR", "Ouvrir %s ?")],
              [("en-US", 'Click <bpt i="1">&lt;b&gt;</bpt>here<ept i="1">&lt;/b&gt;</ept>'),
               ("fr-FR", 'Cliquez <bpt i="1">&lt;b&gt;</bpt>ici<ept i="1">&lt;/b&gt;</ept>')],
              [("de", "Nur Deutsch.")]])
TMX_JUNK = ["<", "</tu>", "<tu>", '<tuv xml:lang="fr">', "<seg>", "</seg>", "</tuv>",
            '<tuv lang="en"><seg>x</seg></tuv>', "&", "&amp;", "&#0;", "<![CDATA[ x < y ]]>",
            "<!-- -->", '<!DOCTYPE x [<!ENTITY a "b">]>', '<?xml version="1.0"?>', "<tmx>",
            "<ph>&lt;</ph>", "\u2028", "é"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(mutations(TMX_JUNK, [st.tuples(st.just("encoding"), st.sampled_from(
    ["UTF-16", "latin1", "x"]))]), max_size=3))
def test_a_mutated_memory_gives_pairs_or_one_line(edits: list[tuple[Any, ...]]) -> None:
    data = mutated(TMX, edits)
    try:
        got = read(data)
    except DataError as e:
        assert str(e).startswith("memory.tmx: ") and "\n" not in str(e), str(e)
        return
    for pair in got:
        assert all(isinstance(s, str) and "\n" not in s and "\r" not in s for s in pair)
