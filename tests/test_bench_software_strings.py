"""bench.software_strings: the corpus from a gettext tree made here (never the system's), and
the measurement end to end on it and the tiny prose corpus, three training steps."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polib

from bench import software_strings
from tests.conftest import tiny_corpus_lines

WORDS = [("file", "fichier"), ("folder", "dossier"), ("disk", "disque"), ("user", "utilisateur"),
         ("package", "paquet"), ("printer", "imprimante")]


def write_catalogues(root: Path) -> Path:
    """Two ``.mo`` files under ``root/fr/LC_MESSAGES`` with strings of several formats, a
    shared string, a two-line one, a plural and a space at an end (an untranslated entry is
    not written: msgfmt and polib leave it out of a ``.mo``)."""
    folder = root / "fr" / "LC_MESSAGES"
    folder.mkdir(parents=True)
    for n, name in enumerate(("alpha", "beta")):
        po = polib.POFile()
        po.metadata = {"Content-Type": "text/plain; charset=UTF-8"}
        for en, fr in WORDS:
            po.append(polib.POEntry(msgid=f"Cannot open {en} %s",
                                    msgstr=f"Impossible d'ouvrir le {fr} %s"))
            po.append(polib.POEntry(msgid=f"The {en} is ready.", msgstr=f"Le {fr} est prêt."))
            po.append(polib.POEntry(msgid=f"<b>{en}</b> {n}", msgstr=f"<b>{fr}</b> {n}"))
            po.append(polib.POEntry(msgid=f"Remove {{name}} from the {en}",
                                    msgstr=f"Retirer {{name}} du {fr}"))
        po.append(polib.POEntry(msgid="two\nlines", msgstr="deux\nlignes"))
        po.append(polib.POEntry(msgid="Usage: ", msgstr="Utilisation : "))
        po.append(polib.POEntry(msgid="%d file", msgid_plural="%d files",
                                msgstr_plural={0: "%d fichier", 1: "%d fichiers"}))
        po.save_as_mofile(str(folder / f"{name}.mo"))
    return root


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_corpus_keeps_one_line_strings_and_holds_whole_strings_out(tmp_path: Path) -> None:
    locales = write_catalogues(tmp_path / "locale")
    out = tmp_path / "work"
    software_strings.main(["corpus", "--out", str(out), "--locales", str(locales),
                           "--test-spans", "3", "--test-plain", "2"])
    summary = json.loads((out / "corpus.json").read_text())
    assert summary["catalogues"] == 2 and summary["entries"] == 2 * (4 * len(WORDS) + 3)
    assert summary["dropped"] == {"several lines": 2}
    train_en, test_en = lines(out / "software.en"), lines(out / "test.en")
    train_fr, test_fr = lines(out / "software.fr"), lines(out / "test.fr")
    assert len(train_en) == len(train_fr) == len(lines(out / "software.origin"))
    assert len(test_en) == len(test_fr) == len(lines(out / "test.origin")) == 5
    pairs = list(zip(train_en + test_en, train_fr + test_fr, strict=True))
    assert len(set(pairs)) == len(pairs)  # duplicates went, each pair once
    assert not set(train_en) & set(test_en)  # a held-out string is in no training pair
    assert ("%d file", "%d fichier") in pairs  # a plural's first form
    assert ("Usage:", "Utilisation :") in pairs  # the space at the end cut off
    assert not any("lines" in e for e, _ in pairs)
    assert sum("%" in e or "{" in e or "<" in e for e in test_en) == 3
    shared = lines(out / "software.origin")[train_en.index("Usage:")]
    assert shared == "alpha,beta"  # both catalogues gave it
    tsv = lines(out / "sources.tsv")
    assert tsv[0].split("\t") == ["catalogue", "package", "licence", "entries", "kept", "dropped"]
    assert [row.split("\t")[:3] for row in tsv[1:]] == [["alpha", "unknown", "unknown"],
                                                        ["beta", "unknown", "unknown"]]
    assert "alpha" in (out / "README").read_text()


def test_licence_of_a_machine_readable_copyright_file_and_of_another(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "copyright").write_text(
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\n"
        "Files: *\nCopyright: 2020 Someone\nLicense: GPL-3+\n\nFiles: lib/x.c\nLicense: MIT\n")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "copyright").write_text("Released under the GNU Lesser General Public "
                                              "License, version 2.1.\n")
    assert software_strings.licence_of("a", tmp_path) == "GPL-3+"
    assert software_strings.licence_of("b", tmp_path) == "LGPL"
    assert software_strings.licence_of("c", tmp_path) == "unknown"


def test_integrity_counts_kept_exact_and_invented_over_every_line() -> None:
    got = software_strings.integrity(
        ["Open %s", "Copy %s to %s", "Done.", "Hello"],
        ["Ouvrir %s", "Copier %s", "Fait %d.", "Bonjour"], "default")
    assert got == {"lines": 4, "span_lines": 2, "span_count": 3, "spans_kept": 66.67,
                   "lines_exact": 50.0, "lines_invented": 25.0,
                   "percent_lines": 2, "format_failed": 1,
                   "kept_by_kind": {"printf": [2, 3]}}
    by_kind = software_strings.integrity(
        ["Run --force on %s", "See <b>{name}</b> and --force"],
        ["Lancer --forcer sur %s", "Voir <b>{name}</b> et --force"], "default")["kept_by_kind"]
    assert by_kind == {"options": [1, 2], "tags": [2, 2], "printf": [1, 1], "python": [1, 1]}
    assert list(by_kind)[:2] == ["options", "tags"]  # the most spans first


def test_integrity_counts_translations_that_would_not_format() -> None:
    """Of the lines with a ``%``: the directives in another order, a stray ``%`` added or a
    directive lost fail; a prose ``50 %`` kept (as the source has it) and a reordered
    ``%2$s`` pass."""
    got = software_strings.integrity(
        ["%s holds %d files", "Done: 50 %", "%1$s of %2$s", "Copy %s", "Copy %s", "No format"],
        ["%d fichiers dans %s", "Fait : 50 %", "%2$s de %1$s", "Copier %s %", "Copier",
         "Pas %s"], "default")
    assert (got["percent_lines"], got["format_failed"]) == (5, 3)


def test_measure_end_to_end(tmp_path: Path, tiny_data_dir: Path) -> None:
    """Three steps on the tiny prose corpus and a few software strings: every engine row
    with numbers in range, the filter table, results.md stamped with the machine."""
    locales = write_catalogues(tmp_path / "locale")
    work = tmp_path / "work"
    software_strings.main(["corpus", "--out", str(work), "--locales", str(locales),
                           "--test-spans", "3", "--test-plain", "2"])
    prose = tmp_path / "prose"
    pairs = [line.split("\t") for line in tiny_corpus_lines()]
    (tmp_path / "prose.en").write_text("".join(e + "\n" for e, _ in pairs), encoding="utf-8")
    (tmp_path / "prose.fr").write_text("".join(f + "\n" for _, f in pairs), encoding="utf-8")
    software_strings.main(["measure", "--work", str(work), "--steps", "3", "--prose", str(prose),
                           "--argos-venv", str(tmp_path / "no-venv"), "--data-dir",
                           str(tiny_data_dir), "--set", "data.vocab_size=150",
                           "--set", "train.threads=1"])
    result = json.loads((work / "results.json").read_text())
    engines = [(r["test"], r["engine"], r["spans"]) for r in result["rows"]]
    assert engines == [(test, engine, spans) for test in ("software", "prose")
                       for engine, spans in software_strings.ENGINES]
    for row in result["rows"]:
        if row["engine"] == "argos":
            assert "not measured" in row["note"] and "no-venv" in row["note"]
            continue
        assert row["lines"] == (5 if row["test"] == "software" else row["lines"]) > 0
        for key in ("spans_kept", "lines_exact", "lines_invented", "bleu", "chrf"):
            assert row[key] is None or 0 <= row[key] <= 100, (key, row)
        if row["test"] == "software":
            assert row["span_lines"] == 3 and row["span_count"] >= 3
            if row["spans"] == "repair":  # the guarantee: every span back, none invented
                assert row["spans_kept"] == 100 and row["lines_invented"] == 0
                assert row["format_failed"] == 0 < row["percent_lines"]
    assert [f["name"] for f in result["filters"]] == ["prose", "software"]
    assert all(f["kept"] <= f["read"] for f in result["filters"])
    table = (work / "results.md").read_text()
    assert f"commit {result['machine']['commit']}" in table
    assert ("| test | engine | --spans | lines | span lines | spans kept | span lines exact "
            "| lines invented | would not format | BLEU | chrF |") in table
    rows = re.findall(r"^\| software \| (nmt|ctranslate2|argos) ", table, re.M)
    assert len(rows) == len(software_strings.ENGINES) + 4  # and four by kind (not Argos')
    assert "Spans kept by kind" in table
    assert "[[data.sources]]" in (work / "software-mix.toml").read_text()

    # Where Argos Translate is not installed, the package is exported all the same, and it
    # comes back with the test sets in parts to be scored where it is (a GPU machine's run)
    assert result["spans_spec"] and result["trained_steps"] == 3
    parts = software_strings.pack(work, tmp_path / "parts", part_bytes=64 * 1024)
    assert len(parts) > 1 and all(p.stat().st_size <= 64 * 1024 for p in parts)
    elsewhere = tmp_path / "elsewhere"
    software_strings.main(["argos", "--work", str(elsewhere), "--unpack",
                           str(tmp_path / "parts"), "--argos-venv", str(echo_venv(tmp_path))])
    scored = json.loads((elsewhere / "results.json").read_text())
    argos = [r for r in scored["rows"] if r["engine"] == "argos"]
    assert [r["test"] for r in argos] == ["software", "prose"]
    for row in argos:  # the stand-in "translates" by copying: every span kept, none invented
        assert "note" not in row and row["lines_invented"] == 0
        assert row["lines"] == (5 if row["test"] == "software" else row["lines"]) > 0
    assert argos[0]["spans_kept"] == 100 and argos[0]["lines_exact"] == 100
    assert [r for r in scored["rows"] if r["engine"] != "argos"] == \
        [r for r in result["rows"] if r["engine"] != "argos"]
    assert "The Argos rows: `python -m bench.software_strings argos`" in \
        (elsewhere / "results.md").read_text()


def echo_venv(root: Path) -> Path:
    """A stand-in for Argos Translate's environment: its ``bin/python``, given the Argos
    script's arguments, writes each source line as its own translation."""
    import sys

    venv = root / "echo-venv"
    (venv / "bin").mkdir(parents=True)
    script = venv / "bin" / "python"
    echo = ("import json, sys; json.dump(open(sys.argv[4], encoding='utf-8').read()"
            ".splitlines(), open(sys.argv[5], 'w', encoding='utf-8'))")
    # called as: python -c SCRIPT package source target lines out
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -c "{echo}" "$3" "$4" "$5" "$6" "$7"\n')
    script.chmod(0o755)
    return venv


def test_packed_parts_must_all_be_there_and_whole(tmp_path: Path) -> None:
    import pytest

    work = tmp_path / "work"
    work.mkdir()
    (work / "corpus.json").write_text('{"target": "fr"}')
    for name in ("results.json", "results.md", "test.en", "test.fr", "prose-test.en",
                 "prose-test.fr", "prose-test.2.fr"):
        (work / name).write_text(name * 40)
    (work / "software-mix.argosmodel").write_bytes(bytes(range(256)) * 64)
    parts = software_strings.pack(work, tmp_path / "parts", part_bytes=4096)
    n = len(parts)
    assert [p.name for p in parts] == [f"spans-package.tar.{k:02d}-of-{n:02d}" for k in range(n)]
    names = software_strings.unpack(tmp_path / "parts", tmp_path / "back")
    assert sorted(names) == sorted(p.name for p in work.iterdir())
    for name in names:
        assert (tmp_path / "back" / name).read_bytes() == (work / name).read_bytes()
    assert not (tmp_path / "back" / "spans-package.tar").exists()
    with pytest.raises(SystemExit, match="no spans-package.tar.00-of-NN there"):
        software_strings.unpack(tmp_path / "nothing", tmp_path / "x")
    parts[0].write_bytes(parts[0].read_bytes()[:100])  # a part cut short in transit
    with pytest.raises(SystemExit, match="not whole"):
        software_strings.unpack(tmp_path / "parts", tmp_path / "y")
    parts[-1].unlink()  # the last part lost: the names say there were more
    with pytest.raises(SystemExit, match="parts missing"):
        software_strings.unpack(tmp_path / "parts", tmp_path / "z")


