"""The placement benchmark (bench/placement.py) counts what it says on lines made for it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.placement import glued_where_the_source_is_not, main, measure


def test_glued_where_the_source_is_not() -> None:
    assert glued_where_the_source_is_not('column "%s.%s"', "parce %sque")
    assert not glued_where_the_source_is_not('column "%s.%s"', "parce %s que")
    assert not glued_where_the_source_is_not("file%d done", "fichier%d fini")
    assert glued_where_the_source_is_not("%s done", "fini%s")  # the side counts
    assert not glued_where_the_source_is_not("<b>Save</b>", "<b>Enregistrer</b>")  # tags aside


def test_measure_counts_guesses_and_agreement() -> None:
    sources = ["Open %s now.", 'cannot alter type "%s" because column "%s.%s" uses it',
               "plain", "Save %d files."]
    outputs = ["Ouvre %s maintenant.",
               "ne peut pas modifier le type « %s » parce que la colonne « %s ».", "simple",
               "Enregistre %d fichiers."]
    refs = ["Ouvrir %s maintenant.", "ne peut pas modifier le type « %s » car la colonne « "
            "%s.%s » l'utilise", "simple", "Enregistrer %d fichiers."]
    row = measure(sources, outputs, refs)
    assert (row["lines"], row["guessed"], row["glued"]) == (4, 1, 0)
    assert row["bleu"] is not None and 0 < row["bleu"] < 100
    # two lines keep their one span; taken out and put back by position, both come back so
    assert (row["single"], row["as_the_model"]) == (2, 2)


def test_cli_writes_the_row_and_refuses_files_of_other_lengths(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name, text in (("s", "Open %s now.\nplain\n"), ("h", "Ouvre maintenant.\nsimple\n"),
                       ("r", "Ouvre %s maintenant.\nsimple\n")):
        (tmp_path / name).write_text(text, encoding="utf-8")
    main(["--src", str(tmp_path / "s"), "--hyp", str(tmp_path / "h"), "--ref",
          str(tmp_path / "r"), "--json", str(tmp_path / "row.json")])
    row = json.loads((tmp_path / "row.json").read_text())
    assert (row["guessed"], row["glued"]) == (1, 0) and "machine" in row
    assert "| 2 | 1 | 0 |" in capsys.readouterr().out
    (tmp_path / "r").write_text("one\n", encoding="utf-8")
    with pytest.raises(SystemExit):
        main(["--src", str(tmp_path / "s"), "--hyp", str(tmp_path / "h"), "--ref",
              str(tmp_path / "r")])
    assert "expected as many lines each, got 2, 2, 1" in capsys.readouterr().err
