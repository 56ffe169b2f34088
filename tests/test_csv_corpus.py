"""A spreadsheet's CSV as a corpus (nmt/data/corpora/csv_file.py): any text a spreadsheet writes
(commas, quotes, line breaks, semicolons) reads back as the pairs written, with either
delimiter, compressed or not, either direction; a header row is skipped and said; bad input is
one line naming the file and line."""

from __future__ import annotations

import csv
import dataclasses
import gzip
import io
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nmt.config import DataConfig
from nmt.data.corpora import Context, open_corpus
from nmt.errors import ConfigError, DataError
from nmt.files import MAX_LINE_BYTES

CFG = DataConfig(columns="key,en,fr")


def read(path: Path, cfg: DataConfig = CFG, log: list[str] | None = None
         ) -> list[tuple[str, str]]:
    said = log if log is not None else []
    return list(open_corpus(str(path), Context(cfg, Path("unused"), log=said.append)).pairs())


def written(rows: list[list[str]], delimiter: str, bom: bool = False) -> bytes:
    out = io.StringIO()
    csv.writer(out, delimiter=delimiter).writerows(rows)  # as spreadsheets quote
    return (("\ufeff" if bom else "") + out.getvalue()).encode()


_CELL = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                max_size=20)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(_CELL, _CELL, _CELL), min_size=1, max_size=20),
       st.sampled_from([",", ";"]), st.booleans(), st.booleans())
def test_any_cells_read_back_as_written(tmp_path_factory: pytest.TempPathFactory,
                                        rows: list[tuple[str, str, str]], delimiter: str,
                                        bom: bool, packed: bool) -> None:
    """Whatever the cells (commas, quotes, line breaks, either delimiter), with a header row,
    Excel's byte-order mark, gzip: the pairs as written, a line break inside a cell a space."""
    folder = tmp_path_factory.mktemp("csv")
    data = written([["id", "English", "French"], *map(list, rows)], delimiter, bom)
    path = folder / ("t.csv.gz" if packed else "t.csv")
    path.write_bytes(gzip.compress(data) if packed else data)
    log: list[str] = []
    got = read(path, log=log)

    def one_line(cell: str) -> str:
        return " ".join(cell.splitlines())

    assert got == [(one_line(en), one_line(fr)) for _, en, fr in rows]
    assert any("read as a header" in line for line in log)


def test_a_spreadsheet_export_either_direction(tmp_path: Path) -> None:
    path = tmp_path / "strings.csv"
    path.write_bytes(written([["key", "en", "fr"], ["menu.open", "Open", "Ouvrir"],
                              ["menu.save", "Save; now", "Enregistrer; maintenant"]], ";"))
    assert read(path) == [("Open", "Ouvrir"), ("Save; now", "Enregistrer; maintenant")]
    reverse = dataclasses.replace(CFG, source="fr", target="en")
    assert read(path, reverse) == [("Ouvrir", "Open"), ("Enregistrer; maintenant", "Save; now")]
    headless = tmp_path / "headless.csv"  # no header: every row a pair
    headless.write_bytes(written([["a", "Hello", "Bonjour"]], ","))
    assert read(headless) == [("Hello", "Bonjour")]


@pytest.mark.parametrize(("content", "said"), [
    (b'k,a,"unclosed\n', 'line 1: not CSV (unexpected end of data; an unclosed quote?)'),
    (b"k,a,b\nk,only\n", "line 2: expected 3 columns (key, en, fr), got 2"),
    (b"k,a,b\n\xe9,x,y\n", "line 2: not valid UTF-8 (byte 1 of the line)"),
    (b"k,a," + b"b" * (MAX_LINE_BYTES + 1) + b"\n", "line 1: longer than"),
    (b'k,a,"' + b"x\n" * (MAX_LINE_BYTES // 2 + 1) + b'"\n', "not CSV (field larger than"),
])
def test_bad_csv_is_one_line_naming_the_line(tmp_path: Path, content: bytes, said: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_bytes(content)
    with pytest.raises(DataError) as e:
        read(path)
    assert str(path) in str(e.value) and said in str(e.value) and "\n" not in str(e.value)


def test_columns_are_asked_for(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("a,b\n")
    with pytest.raises(ConfigError, match="data.columns: expected the language of each column"):
        read(tmp_path / "t.csv", DataConfig())
