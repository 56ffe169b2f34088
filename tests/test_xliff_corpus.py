"""Bilingual XLIFF files as a corpus (nmt/data/corpora/xliff.py): the translated segments of
1.2 and 2 files give the pairs aligned files of the same text give; what is not a translation
to learn from (no target, ``translate="no"``, untranslated or machine-translated states, nmt's
own output) is skipped and said; a mutated or hostile file gives pairs or a one-line error."""

from __future__ import annotations

import dataclasses
import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, unescape

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_corpora import CFG, pairs, quiet, same_arrays, write_aligned
from test_reliability_structure import mutated, mutations

from nmt.data.corpora import xliff, xml_units
from nmt.data.prepare import prepare
from nmt.errors import DataError


def xliff12(files: list[tuple[str, str, list[str]]]) -> str:
    """An XLIFF 1.2 document: ``files`` of (source-language, target-language, units' markup)."""
    body = "".join(f'  <file source-language="{s}" target-language="{t}" datatype="plaintext" '
                   f'original="f{i}">\n   <body>\n' + "".join(f"    {u}\n" for u in units)
                   + "   </body>\n  </file>\n" for i, (s, t, units) in enumerate(files))
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<xliff version="1.2" '
            'xmlns="urn:oasis:names:tc:xliff:document:1.2">\n' + body + "</xliff>\n")


def unit12(source: str, target: str | None, attributes: str = "", more: str = "") -> str:
    target_ = "" if target is None else f"<target{attributes}>{target}</target>"
    return f'<trans-unit id="u"><source>{source}</source>{target_}{more}</trans-unit>'


def xliff2(units: list[str], src: str = "en", trg: str = "fr") -> str:
    return (f'<?xml version="1.0"?>\n<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" '
            f'version="2.0" srcLang="{src}" trgLang="{trg}">\n <file id="f">\n'
            + "".join(f'  <unit id="u{i}">{u}</unit>\n' for i, u in enumerate(units))
            + " </file>\n</xliff>\n")


def read(text: str | bytes, source: str = "en", target: str = "fr",
         log: Callable[[str], None] = quiet) -> list[tuple[str, str]]:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return list(xliff.read_pairs(lambda: io.BytesIO(data), "project.xlf", source, target, log))


def test_a_project_builds_the_arrays_its_pairs_do_as_aligned_files(tiny_data_dir: Path,
                                                                   tmp_path: Path) -> None:
    """An XLIFF 1.2 file of the other direction (fr -> en, regional tags), with untranslated
    units among the translated ones, skipped and said; compressed, as files travel."""
    import gzip

    rows = pairs()
    write_aligned(tmp_path / "mine" / "train", rows)
    aligned = prepare(dataclasses.replace(CFG, corpus=str(tmp_path / "mine" / "train")),
                      tiny_data_dir, log=quiet)
    units = [unit12(escape(fr), escape(en), ' state="final"') for en, fr in rows]
    units.insert(3, unit12("Pas traduit.", None))
    path = tmp_path / "project.xlf.gz"
    path.write_bytes(gzip.compress(xliff12([("fr-FR", "en-US", units)]).encode()))
    said: list[str] = []
    from_xliff = prepare(dataclasses.replace(CFG, corpus=str(path)), tiny_data_dir,
                         log=said.append)
    same_arrays(aligned, from_xliff)
    assert from_xliff.identity["corpus"]["form"] == "xliff"
    assert f"warning: {path}: 1 of {len(rows) + 1:,} segments untranslated, not to be " \
        "translated, or machine-translated: skipped" in said


def test_only_translations_are_read_in_1_2() -> None:
    units = [
        unit12('Cannot open <ph id="1">%s</ph>: <g id="2">denied</g><x id="3"/>.',
               'Impossible d\'ouvrir <ph id="1">%s</ph> : <g id="2">refusé</g><x id="3"/>.',
               ' state="translated"',
               "<alt-trans><source>Cannot</source><target>Non</target></alt-trans>"
               "<note>not this</note>"),
        unit12("No target", None),
        unit12("Empty", ""),
        unit12("New", "New", ' state="new"'),
        unit12("Needs", "Needs", ' state="needs-translation"'),
        '<group translate="no">' + unit12("Brand", "Brand") + "</group>",
        unit12("Save", "Enregistrer", ' state="needs-review-translation" '
               'state-qualifier="mt-suggestion"'),
        unit12("Leveraged", "Leveraged", ' state-qualifier="leveraged-mt"'),
        unit12("Reviewed", "Relu", ' state="needs-review-translation"'),
        '<trans-unit id="s"><source>Open it.\nClose it.</source><seg-source><mrk mtype="seg" '
        'mid="1">Open it.</mrk> <mrk mtype="seg" mid="2">Close it.</mrk></seg-source><target>'
        '<mrk mtype="seg" mid="1">Ouvrez-le.</mrk> <mrk mtype="seg" mid="2">Fermez-le.</mrk>'
        "</target></trans-unit>",
    ]
    said: list[str] = []
    other = [("de", "fr", [unit12("Hallo", "Bonjour")]), ("fr", "en", [unit12("Oui", "Yes")])]
    assert read(xliff12([("en-US", "fr-FR", units), *other]), log=said.append) == [
        ("Cannot open %s: denied.", "Impossible d'ouvrir %s : refusé."),
        ("Reviewed", "Relu"),
        ("Open it. Close it.", "Ouvrez-le. Fermez-le."),
        ("Yes", "Oui"),
    ]
    assert said == ["warning: project.xlf: 7 of 12 segments untranslated, not to be "
                    "translated, or machine-translated: skipped",
                    "warning: project.xlf: 1 of 12 segments in another pair of languages: "
                    "skipped"]


def test_only_translations_are_read_in_2() -> None:
    units = [
        '<segment state="translated"><source>Delete <pc id="1">all</pc> files<ph id="2"/>?'
        '</source><target>Supprimer <pc id="1">tous</pc> les fichiers<ph id="2"/> ?</target>'
        '</segment><ignorable><source> </source><target> </target></ignorable>'
        '<segment state="final"><source>A<cp hex="0009"/>b</source><target>A<cp hex="0009"/>'
        "c</target></segment>",
        '<segment state="initial"><source>Initial</source><target>Initial</target></segment>'
        '<segment state="translated" subState="nmt:mt"><source>By nmt</source><target>Par nmt'
        "</target></segment><segment><source>No state</source><target>Sans état</target>"
        "</segment>",
    ]
    text = xliff2(units)
    assert read(text) == [("Delete all files?", "Supprimer tous les fichiers ?"),
                          ("A\tb", "A\tc"), ("No state", "Sans état")]
    assert read(xliff2(units, "fr", "en"), "en", "fr")[0] == (
        "Supprimer tous les fichiers ?", "Delete all files?")
    assert read(text.replace('<unit id="u0">', '<unit id="u0" translate="no">')) == [
        ("No state", "Sans état")]


def test_what_nmt_filled_is_not_read_as_a_translation() -> None:
    """A file ``nmt translate`` filled (targets marked for review as machine translation) and
    read back as a corpus: only what a translator had translated is learnt from."""
    from nmt.localisation import xliff as filling

    for text in (xliff12([("en", "fr", [unit12("Done", "Fait"), unit12("Open", None)])]),
                 xliff2(['<segment state="final"><source>Done</source><target>Fait</target>'
                         "</segment>", "<segment><source>Open</source></segment>"])):
        filled, report = filling.fill(text.encode(), "project.xlf",
                                      lambda texts: [t.upper() for t in texts],
                                      lambda: "fr", [])
        assert b"OPEN" in filled
        assert read(filled) == [("Done", "Fait")]


BILLION_LAUGHS = '''<?xml version="1.0"?>
<!DOCTYPE xliff [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>
<xliff version="1.2"><file source-language="en" target-language="fr"><body>
<trans-unit id="1"><source>&b;</source><target>&b;</target></trans-unit></body></file></xliff>
'''


@pytest.mark.parametrize(("text", "message"), [
    (BILLION_LAUGHS, "project.xlf: an entity declaration; an XLIFF file needs none"),
    (xliff12([("en", "fr", [unit12("a", "b")])]).replace("</trans-unit>", "</target>", 1),
     "project.xlf: line 5: not well-formed XML (mismatched tag)"),
    ("<tmx><body/></tmx>", "project.xlf: not an XLIFF document (its root is <tmx>)"),
    ("", "project.xlf: line 1: not well-formed XML (no element found)"),
    (xliff12([("de", "es", [unit12("a", "b")])]),
     "project.xlf: no translated segment in 'en' and 'fr' (its languages: de -> es)"),
    (xliff12([("en", "fr", [unit12("a", None), unit12("b", "b", ' state="new"')])]),
     "project.xlf: none of its 2 segments is translated"),
])
def test_bad_files_are_one_line(text: str, message: str) -> None:
    with pytest.raises(DataError) as e:
        read(text)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_an_empty_project_gives_nothing_and_says_nothing() -> None:
    said: list[str] = []
    assert read(xliff12([("en", "fr", [])]), log=said.append) == [] and said == []


def test_segments_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in (xliff, xml_units):
        monkeypatch.setattr(module, "MAX_LINE_BYTES", 1000)
    monkeypatch.setattr(xml_units, "PIECE", 256)
    said: list[str] = []
    long = "x" * 600 + "<g id='1'>" + "y" * 600 + "</g>"
    text = xliff12([("en", "fr", [unit12("a", "b"), unit12(long, "c"), unit12("d", long)])])
    assert read(text, log=said.append) == [("a", "b"), ("", "c"), ("d", "")]
    assert said == ["warning: project.xlf: 2 segments longer than 0 MiB (first: line 6) read "
                    "as empty: their pairs are dropped"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.text(min_size=1, max_size=30), st.text(min_size=1, max_size=30)),
                max_size=8),
       st.sampled_from(["1.2", "2.0"]))
def test_any_text_comes_back_as_written(rows: list[tuple[str, str]], version: str) -> None:
    """Any text XML can hold, escaped as a tool writes it, is read back as written (a line break
    a space); characters XML cannot hold are left out here, as a file cannot have them."""
    def xml(s: str) -> str:
        return escape("".join(c for c in s if c in "\t\n\r" or (
            " " <= c <= "\ud7ff" or "\ue000" <= c <= "\ufffd")))

    rows = [(xml(s), xml(t)) for s, t in rows]
    rows = [(s, t) for s, t in rows if t.strip()]
    if version == "1.2":
        text = xliff12([("en", "fr", [unit12(s, t) for s, t in rows])])
    else:
        text = xliff2([f"<segment><source>{s}</source><target>{t}</target></segment>"
                       for s, t in rows])
    def back(s: str) -> str:
        return re.sub(r"[\r\n]+", " ", unescape(s))

    assert read(text) == [(back(s), back(t)) for s, t in rows]


XLIFF = xliff12([("en-US", "fr-FR", [unit12("Open %s?", "Ouvrir %s ?"),
                                     unit12('Click <ph id="1">&lt;b&gt;</ph>here',
                                            'Cliquez <ph id="1">&lt;b&gt;</ph>ici',
                                            ' state="final"')])])
XLIFF_JUNK = ["<", "</trans-unit>", "<trans-unit>", "<target>", "</target>", "<source>",
              '<group translate="no">', "</group>", '<target state="new">', "&", "&amp;",
              "&#0;", "<![CDATA[ x < y ]]>", "<!-- -->", '<!DOCTYPE x [<!ENTITY a "b">]>',
              '<file target-language="de">', "<xliff>", "<cp hex='zz'/>", "\u2028", "é"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(mutations(XLIFF_JUNK, []), max_size=3))
def test_a_mutated_file_gives_pairs_or_one_line(edits: list[tuple[Any, ...]]) -> None:
    data = mutated(XLIFF, edits)
    try:
        got = read(data)
    except DataError as e:
        assert str(e).startswith("project.xlf: ") and "\n" not in str(e), str(e)
        return
    for pair in got:
        assert all(isinstance(s, str) and "\n" not in s and "\r" not in s for s in pair)
