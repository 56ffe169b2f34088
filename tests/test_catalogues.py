"""gettext catalogues as a corpus (nmt/data/corpora/catalogues.py): a PO file and its MO build
the arrays their pairs do as aligned files; what is read of plural, multi-line, fuzzy and
obsolete entries; either direction by the Language header; and a damaged or hostile catalogue
gives pairs or a one-line error."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polib
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_corpora import CFG, pairs, quiet, same_arrays, write_aligned
from test_reliability_structure import mutate, mutated, mutations

from nmt.data.corpora import catalogues
from nmt.data.prepare import prepare
from nmt.errors import DataError


def catalogue(entries: list[polib.POEntry], language: str | None = "fr") -> polib.POFile:
    po = polib.POFile()
    po.metadata = {"Content-Type": "text/plain; charset=UTF-8",
                   **({"Language": language} if language is not None else {})}
    for entry in entries:
        po.append(entry)
    return po


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # a catalogue is named by its path: here, its name


def read(path: Path, source: str = "en", target: str = "fr",
         log: Callable[[str], None] = quiet) -> list[tuple[str, str]]:
    return list(catalogues.read_pairs([Path(path.name)], path.name, source, target, log))


def test_a_catalogue_and_its_mo_build_the_arrays_their_pairs_do(tiny_data_dir: Path,
                                                                tmp_path: Path) -> None:
    """What is not a finished translation (fuzzy, obsolete, untranslated) is not read."""
    rows = pairs()
    write_aligned(tmp_path / "mine" / "train", rows)
    aligned = prepare(dataclasses.replace(CFG, corpus=str(tmp_path / "mine" / "train")),
                      tiny_data_dir, log=quiet)
    entries = [polib.POEntry(msgid=en, msgstr=fr) for en, fr in dict(rows).items()]
    entries[3:3] = [polib.POEntry(msgid="Not yet", msgstr=""),
                    polib.POEntry(msgid="Unsure", msgstr="Pas sûr", flags=["fuzzy"]),
                    polib.POEntry(msgid="Gone", msgstr="Parti", obsolete=True)]
    po = catalogue(entries, "fr_FR")
    po.save(str(tmp_path / "fr.po"))
    po.save_as_mofile(str(tmp_path / "fr.mo"))
    # the tiny corpus has sources with several translations: a catalogue has one each
    kept = dict(rows)
    write_aligned(tmp_path / "one" / "train", list(kept.items()))
    one = prepare(dataclasses.replace(CFG, corpus=str(tmp_path / "one" / "train")),
                  tiny_data_dir, log=quiet)
    write_aligned(tmp_path / "sorted" / "train", sorted(kept.items()))  # as an MO holds them
    in_order = prepare(dataclasses.replace(CFG, corpus=str(tmp_path / "sorted" / "train")),
                       tiny_data_dir, log=quiet)
    for name, expected in (("fr.po", one), ("fr.mo", in_order)):
        got = prepare(dataclasses.replace(CFG, corpus=str(tmp_path / name)), tiny_data_dir,
                      log=quiet)
        same_arrays(expected, got)
        assert got.identity["corpus"]["form"] == "gettext"
    assert aligned.identity["corpus"]["form"] == "aligned"


def test_what_is_read_of_each_entry(tmp_path: Path) -> None:
    path = tmp_path / "fr.po"
    catalogue([
        polib.POEntry(msgid="%d file", msgid_plural="%d files",
                      msgstr_plural={0: "%d fichier", 1: "%d fichiers"}),
        polib.POEntry(msgid="One thing", msgid_plural="Things", msgstr_plural={0: "Une chose"}),
        polib.POEntry(msgid="Usage: x [OPTION]\n  -a  all\n", msgstr="Usage : x [OPTION]\n"
                      "  -a  tout\n"),
        polib.POEntry(msgid="Two\nlines", msgstr="Une seule ligne"),
        polib.POEntry(msgid="Open", msgstr="Ouvrir", msgctxt="menu"),
    ]).save(str(path))
    assert read(path) == [
        ("%d file", "%d fichier"), ("%d files", "%d fichiers"), ("One thing", "Une chose"),
        ("Usage: x [OPTION] -a  all", "Usage : x [OPTION] -a  tout"),
        ("Two lines", "Une seule ligne"), ("Open", "Ouvrir")]


def test_the_language_header_says_the_direction(tmp_path: Path) -> None:
    path = tmp_path / "x.po"
    catalogue([polib.POEntry(msgid="Go", msgstr="Va")], "fr").save(str(path))
    assert read(path) == [("Go", "Va")]
    assert read(path, "fr", "en") == [("Va", "Go")]
    with pytest.raises(DataError, match=r"^x.po: a catalogue of 'fr' \(its Language header\), "
                                        r"not 'de' or 'en'"):
        read(path, "en", "de")
    catalogue([polib.POEntry(msgid="Go", msgstr="Geh")], None).save(str(path))
    assert read(path, "en", "de") == [("Go", "Geh")]  # no header: in data.target
    catalogue([polib.POEntry(msgid="Go", msgstr="Idi")], "sr@latin").save(str(path))
    assert read(path, "en", "sr") == [("Go", "Idi")]  # a gettext locale's modifier
    assert read(path, "sr", "en") == [("Idi", "Go")]


@pytest.mark.parametrize(("name", "content", "message"), [
    ("x.po", b'msgid "a"\nfoo bar\n', "x.po: line 2: not a gettext catalogue (a syntax error)"),
    ("x.po", b"\xff\xfe\x00garbage\x00", "x.po: not a gettext catalogue ("),
    ("x.mo", b"\xde\x12\x04\x95" + b"\xff" * 40, "x.mo: not a gettext catalogue ("),
    ("x.mo", b"not an mo file at all", "x.mo: not a gettext catalogue ("),
])
def test_what_is_no_catalogue_is_one_line(tmp_path: Path, name: str, content: bytes,
                                          message: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(DataError) as e:
        read(path)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_a_catalogue_too_large_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catalogues, "MAX_BYTES", 100)
    path = tmp_path / "x.po"
    catalogue([polib.POEntry(msgid="x" * 200, msgstr="y")]).save(str(path))
    with pytest.raises(DataError, match=r"^x.po: 0 MiB; a catalogue of more than 0 MiB is "):
        read(path)


def test_a_directory_of_catalogues(tiny_data_dir: Path, tmp_path: Path) -> None:
    """Its .po and .mo files in name order, those of another language skipped and said; none
    of either language an error; a file given alone of another language an error."""
    folder = tmp_path / "LC_MESSAGES"
    folder.mkdir()
    catalogue([polib.POEntry(msgid="Go", msgstr="Va")]).save(str(folder / "b.po"))
    catalogue([polib.POEntry(msgid="Run", msgstr="Cours")]).save_as_mofile(str(folder / "a.mo"))
    catalogue([polib.POEntry(msgid="Go", msgstr="Geh")], "de").save(str(folder / "c.po"))
    (folder / "README").write_text("not a catalogue")
    (folder / "sub").mkdir()
    catalogue([polib.POEntry(msgid="Deep", msgstr="Profond")]).save(str(folder / "sub" / "d.po"))
    said: list[str] = []
    paths = [folder / n for n in ("a.mo", "b.po", "c.po")]
    assert list(catalogues.read_pairs(paths, "LC_MESSAGES", "en", "fr", said.append)) == [
        ("Run", "Cours"), ("Go", "Va")]
    assert said == ["warning: LC_MESSAGES: 1 catalogue of other languages skipped (1 of 'de')"]
    with pytest.raises(DataError, match=r"^LC_MESSAGES: no catalogue of 'es' or 'en' \(2 of "
                                        r"'fr', 1 of 'de', by their Language headers\)$"):
        list(catalogues.read_pairs(paths, "LC_MESSAGES", "en", "es", quiet))
    cfg = dataclasses.replace(CFG, corpus=str(folder))
    from nmt.data.corpora import Context, open_corpus
    corpus = open_corpus(str(folder), Context(cfg, tiny_data_dir, log=quiet))
    assert corpus.identity.form == "gettext" and corpus.identity.files == [str(p) for p in paths]
    assert list(corpus.pairs()) == [("Run", "Cours"), ("Go", "Va")]  # not sub/d.po


PO = str(catalogue([polib.POEntry(msgid="Open %s?", msgstr="Ouvrir %s ?"),
                    polib.POEntry(msgid="%d file", msgid_plural="%d files",
                                  msgstr_plural={0: "%d fichier", 1: "%d fichiers"}),
                    polib.POEntry(msgid="Two\nlines", msgstr="Deux\nlignes", flags=["c-format"]),
                    polib.POEntry(msgid="Hidden", msgstr="Caché", flags=["fuzzy"])]))
PO_JUNK = ['msgid ""', 'msgstr ""', "#, fuzzy", '#~ msgid "x"', 'msgctxt "c"', 'msgstr[0] "a"',
           '"Language: de\\n"', '"Content-Type: text/plain; charset=latin1\\n"', '"\\', "é", ""]


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(mutations(PO_JUNK), max_size=3), st.sampled_from(["po", "mo"]))
def test_a_mutated_catalogue_gives_pairs_or_one_line(tmp_path: Path, edits: list[tuple[Any, ...]],
                                                     kind: str) -> None:
    path = tmp_path / f"fr.{kind}"
    if kind == "po":
        path.write_bytes(mutated(PO, edits))
    else:  # the compiled catalogue's bytes mutated
        source = tmp_path / "clean.po"
        source.write_text(PO, encoding="utf-8")
        polib.pofile(str(source)).save_as_mofile(str(tmp_path / "clean.mo"))
        data = (tmp_path / "clean.mo").read_bytes()
        for edit in edits:
            data = mutate(data, edit)
        path.write_bytes(data)
    try:
        got = read(path, "en", "fr")
    except DataError as e:
        assert str(e).startswith(f"fr.{kind}: ") and "\n" not in str(e), str(e)
        return
    for pair in got:
        assert all(isinstance(s, str) and "\n" not in s for s in pair)

