"""A CSV file of translations, as a spreadsheet exports it (Excel, LibreOffice, Google Sheets,
a localisation platform's "download as CSV"): ``data.corpus = "strings.csv"`` with
``data.columns = ["key", "en", "fr"]`` naming each column's language (as for a TSV; a column of
anything else, an identifier, gets any other name).

Read with Python's ``csv`` module, so quoted fields may hold commas, quotes (``""``) and line
breaks (a line break inside a field is read as a space: a pair is one line of the cache). The
delimiter is a comma, or a semicolon where the first line has more semicolons than commas
outside quotes (spreadsheets in locales whose decimal mark is a comma write those). A first row
whose cell in each language's column begins with that language's English name or code
(``English``, ``French words/sentences``, ``en``, ``fr-FR``) is a header, skipped and said once.
UTF-8, with or without Excel's byte-order mark; compressed too (:mod:`nmt.data.compressed`).
Bounds: a field over :data:`nmt.files.MAX_LINE_BYTES` (an unclosed quote runs to the end of
the file) is an error naming its line, never a file read whole.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Iterator
from typing import BinaryIO

from nmt.data.compressed import plain_name
from nmt.data.corpora.base import (
    Context,
    Corpus,
    Identity,
    Lazy,
    Opener,
    given_columns,
    opener,
    resolve,
)
from nmt.data.download import sha256_file
from nmt.data.languages import LANGUAGES, same_language
from nmt.errors import DataError, named, os_reason
from nmt.files import MAX_LINE_BYTES


def _delimiter(first_line: str) -> str:
    outside = re.sub(r'"[^"]*"', "", first_line)  # quoted text holds any commas it likes
    return ";" if outside.count(";") > outside.count(",") else ","


def _names(cell: str, code: str) -> bool:
    """Whether a header cell names the language ``code``: its first word is the language's
    English name or a tag of it (``English words/sentences``, ``fr-FR``)."""
    word = re.match(r"[^\W\d_][\w-]*", cell.strip())
    if word is None:
        return False
    first = word.group(0)
    base = code.split("-")[0]
    name = LANGUAGES[base].name if base in LANGUAGES else ""
    return same_language(first, code) or (bool(name) and first.lower() == name.split()[0].lower())


def csv_pairs(open_: Opener, where: str, columns: list[str], source: int, target: int,
              log: Callable[[str], None]) -> Iterator[tuple[str, str]]:
    """The (source, target) pairs of the CSV file ``open_`` opens, its columns ``columns``."""
    csv.field_size_limit(MAX_LINE_BYTES)
    with open_() as raw:
        lines = _Lines(raw, where)
        first = lines.read().removeprefix("\ufeff")
        rows = csv.reader(lines.all(first), delimiter=_delimiter(first), strict=True)
        try:
            for n, row in enumerate(rows, 1):
                if len(row) < len(columns):
                    if not any(cell.strip() for cell in row):
                        continue  # a blank line
                    raise DataError(f"{where}: line {lines.number}: expected {len(columns)} "
                                    f"columns ({', '.join(columns)}), got {len(row)}")
                if n == 1 and _names(row[source], columns[source]) and \
                        _names(row[target], columns[target]):
                    log(f"note: {where}: its first row ({named(row[source])}, "
                        f"{named(row[target])}) read as a header, not a pair")
                    continue
                yield " ".join(row[source].splitlines()), " ".join(row[target].splitlines())
        except csv.Error as e:
            raise DataError(f"{where}: line {lines.number}: not CSV ({e}; an unclosed "
                            "quote?)") from None


class _Lines:
    """The file's lines as ``csv`` reads them, each at most :data:`MAX_LINE_BYTES` bytes (a
    longer one is an error naming it: memory stays bounded), decoded one at a time so that an
    undecodable byte names its line."""

    def __init__(self, raw: BinaryIO, where: str) -> None:
        self.raw, self.where, self.number = raw, where, 0

    def read(self) -> str:
        try:
            line = self.raw.readline(MAX_LINE_BYTES + 1)
        except OSError as e:
            raise DataError(f"{self.where}: line {self.number + 1}: cannot read "
                            f"({os_reason(e)})") from None
        if not line:
            return ""
        self.number += 1
        if len(line) > MAX_LINE_BYTES:
            raise DataError(f"{self.where}: line {self.number}: longer than "
                            f"{MAX_LINE_BYTES:,} bytes; expected a CSV file")
        try:
            return line.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DataError(f"{self.where}: line {self.number}: not valid UTF-8 (byte "
                            f"{e.start + 1} of the line); save the file as UTF-8") from None

    def all(self, first: str) -> Iterator[str]:
        line = first
        while line:
            yield line
            line = self.read()


class CsvFile:
    name = "csv"

    def claims(self, spec: str, ctx: Context) -> bool:
        return plain_name(spec).lower().endswith(".csv")

    def open(self, spec: str, ctx: Context) -> Corpus:
        path = resolve(spec, ctx.option)
        columns, (src, tgt) = given_columns(ctx, path)
        open_ = opener(path, str(path))
        identity = Identity(self.name, spec, sha256_file(path), ctx.cfg.source, ctx.cfg.target,
                            files=[str(path)])
        return Lazy(identity, lambda: csv_pairs(open_, str(path), columns, src, tgt, ctx.log))


FORM = CsvFile()
