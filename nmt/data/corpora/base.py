"""What every corpus form shares: the :class:`Corpus` a reader returns, its identity, and the
reading of text files (UTF-8, byte-order mark and CRLF accepted, errors naming file and line).

A form is one module with one :class:`Form`: ``claims(spec, ctx)`` says whether a
``data.corpus`` value is its kind, ``open(spec, ctx)`` returns a :class:`Corpus`. A corpus
yields raw ``(source, target)`` text in the configured direction and nothing else: cleaning,
normalisation and tokenization happen once, downstream, for every form alike.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from nmt.config import DataConfig
from nmt.data import compressed
from nmt.errors import ConfigError, DataError, os_reason
from nmt.files import MAX_LINE_BYTES, path_problem, read_lines

# The licence of everything taken from Tatoeba (the built-in corpus, the site's pairs)
TATOEBA_LICENCE = (
    "the Tatoeba project (https://tatoeba.org), as packaged by ManyThings.org "
    "(https://www.manythings.org/anki/), licensed CC-BY 2.0 (France) "
    "(https://creativecommons.org/licenses/by/2.0/fr/). Attribution: tatoeba.org and "
    "manythings.org/anki"
)


@dataclass(frozen=True)
class Context:
    """What a form may need besides the ``data.corpus`` value: the data config (languages,
    columns), where downloads go, ``--source`` for an archive, and where to log."""

    cfg: DataConfig
    data_dir: Path
    source: str | None = None
    log: Callable[[str], None] = print
    option: str = "data.corpus"  # the key the value came from, for messages


@dataclass(frozen=True)
class Identity:
    """Which data a cache and a run were made from (``meta.json``, ``corpus.json``)."""

    form: str  # the form's name in the registry
    corpus: str  # the value of data.corpus (or data.valid / data.test)
    sha256: str  # of the content: the text file, or the digests of every file read
    source: str  # language codes, in the configured direction
    target: str
    licence: str = ""  # what is known of the data's licence and attribution ("": not stated)
    files: list[str] = field(default_factory=list)  # what was read, for people

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Corpus(Protocol):
    """Parallel text in the configured direction."""

    identity: Identity

    def pairs(self) -> Iterator[tuple[str, str]]:
        """Raw ``(source, target)`` text, in file order; a bad line raises a one-line
        :class:`DataError` naming the file and line."""
        ...


class Form(Protocol):
    name: str

    def claims(self, spec: str, ctx: Context) -> bool:
        """Whether ``spec`` (the value of ``data.corpus``) is of this form."""
        ...

    def open(self, spec: str, ctx: Context) -> Corpus:
        ...


@dataclass
class Lazy:
    """A :class:`Corpus` whose text is read when its pairs are asked for (a cache hit needs only
    the identity)."""

    identity: Identity
    read: Callable[[], Iterator[tuple[str, str]]]

    def pairs(self) -> Iterator[tuple[str, str]]:
        return self.read()


def tab_rows(lines: Iterable[str], where: str, columns: Sequence[str]) -> Iterator[list[str]]:
    """Tab-separated ``lines`` as rows of at least ``len(columns)`` fields (more are allowed: a
    Tatoeba file's third column is attribution). A blank line is a row of empty fields, which
    cleaning drops as empty; a line with too few fields is an error naming it."""
    need = len(columns)
    for i, line in enumerate(lines, 1):
        row = line.split("\t")
        if len(row) < need:
            if not line.strip():
                yield [""] * need
                continue
            raise DataError(f"{where}: line {i}: expected {need} tab-separated columns "
                            f"({', '.join(columns)}), got {len(row)}")
        yield row


def direction(columns: Sequence[str], cfg: DataConfig, where: str) -> tuple[int, int]:
    """The columns of ``cfg.source`` and ``cfg.target`` among the languages ``columns`` of a
    file: the one rule that turns a corpus around (``fr -> en`` on an ``en, fr`` file)."""
    missing = [code for code in (cfg.source, cfg.target) if code not in columns]
    if missing:
        raise DataError(f"{where}: holds {' and '.join(c for c in columns if c)}, not "
                        f"{missing[0]!r} (data.source = {cfg.source!r}, data.target = "
                        f"{cfg.target!r})")
    return columns.index(cfg.source), columns.index(cfg.target)


def tab_pairs(open_: Opener, where: str, columns: Sequence[str],
              cfg: DataConfig, log: Callable[[str], None] = print,
              ) -> Callable[[], Iterator[tuple[str, str]]]:
    """The reader of a tab-separated file whose columns hold the languages ``columns``: its
    (source, target) pairs in the config's direction (:func:`direction`, checked now;
    ``open_`` opens the file when the reader is called). Lines whose number of fields differs
    from most lines' are said once, with their count and the first one (:func:`odd_rows`)."""
    src_col, tgt_col = direction(columns, cfg, where)

    def read() -> Iterator[tuple[str, str]]:
        widths: Counter[int] = Counter()
        first: dict[int, int] = {}
        for i, row in enumerate(tab_rows(text_lines(open_, where, log), where, columns), 1):
            widths[len(row)] += 1
            first.setdefault(len(row), i)
            yield row[src_col], row[tgt_col]
        line = odd_rows(widths, first, where)
        if line:
            log(line)

    return read


def odd_rows(widths: Counter[int], first: dict[int, int], where: str) -> str | None:
    """A warning when some lines have another number of tab-separated fields than most: the
    sign of a quoted field holding a tab (``"Go<TAB>now."``), which splits a sentence in two
    and shifts the columns after it."""
    if len(widths) < 2:
        return None
    usual = widths.most_common(1)[0][0]
    odd = {w: n for w, n in widths.items() if w != usual}
    n = sum(odd.values())
    line = min(first[w] for w in odd)
    return (f"warning: {where}: {n:,} line{'s' if n > 1 else ''} of {sum(widths.values()):,} "
            f"{'have' if n > 1 else 'has'} another number of tab-separated fields than the "
            f"{usual} of most (first: line {line}): a quoted field holding a tab, or a stray "
            "tab? Such lines are read by their first columns")


# Opens a corpus file for reading, each time its pairs are read (the text is never held whole)
Opener = Callable[[], BinaryIO]


def opener(path: Path, where: str) -> Opener:
    """An :data:`Opener` of ``path``, which is checked now (missing, a directory, a FIFO: one
    line naming it); a compressed file is read as the text it holds
    (:func:`nmt.data.compressed.open_file`)."""
    problem = path_problem(path)
    if problem:
        raise DataError(f"{where}: {problem}")

    def open_() -> BinaryIO:
        try:
            return compressed.open_file(path, where)
        except OSError as e:
            raise DataError(f"{where}: cannot read ({os_reason(e)})") from None

    return open_


def member_opener(path: Path, info: zipfile.ZipInfo, where: str) -> Opener:
    """An :data:`Opener` of the member ``info`` of the zip archive ``path``, read in place (never
    unpacked), with the decompression-bomb bound of :mod:`nmt.data.compressed`; a member it
    cannot read is one line after ``where`` (:func:`nmt.data.download.zip_problem`)."""
    def open_() -> BinaryIO:
        with reading_zip(where), zipfile.ZipFile(path) as z:
            member = z.open(info)  # it stays open once the archive closes
        return compressed.checked(member, max(info.compress_size, 1), where, "zip")

    return open_


@contextmanager
def reading_zip(where: str) -> Iterator[None]:
    """A block that reads a zip archive: what it raises of the archive (:data:`~nmt.data.
    download.ZIP_ERRORS`, an ``OSError``) is one :class:`DataError` after ``where``."""
    from nmt.data.download import ZIP_ERRORS, zip_problem

    try:
        yield
    except OSError as e:
        raise DataError(f"{where}: cannot read ({os_reason(e)})") from None
    except ZIP_ERRORS as e:
        raise DataError(f"{where}: cannot read the zip archive: {zip_problem(e)}") from None


def given_columns(ctx: Context, path: Path) -> tuple[list[str], tuple[int, int]]:
    """The languages ``data.columns`` gives the columns of the file ``path`` (a TSV, a CSV),
    and the columns of ``data.source`` and ``data.target`` among them (:func:`direction`,
    checked before the file is read)."""
    if not ctx.cfg.columns:
        raise ConfigError(f"data.columns: expected the language of each column of {path}, "
                          'e.g. columns = ["en", "fr"] (another name for a column of anything '
                          "else)")
    columns = ctx.cfg.columns.split(",")
    return columns, direction(columns, ctx.cfg, str(path))



def text_lines(open_: Opener, where: str, log: Callable[[str], None] = print) -> Iterator[str]:
    """The lines of a UTF-8 corpus file, one at a time (:func:`nmt.files.read_lines`: lines end
    at ``\\n`` only, so U+2028 and U+0085 cannot misalign two files; undecodable bytes are one
    error naming the line); a leading byte-order mark is dropped. A line longer than
    :data:`nmt.files.MAX_LINE_BYTES` is read as empty (its pair is then dropped as empty, and
    the other file keeps its alignment), said once at the end with the count and the first."""
    long = [0, 0]  # how many, the first

    def on_long(number: int, _: int) -> None:
        long[0] += 1
        long[1] = long[1] or number

    with open_() as stream:
        lines = read_lines(stream, where, on_long, long_as_empty=True)
        first = next(lines, None)
        if first is not None:
            yield first.removeprefix("\ufeff")
            yield from lines
    if long[0]:
        log(read_as_empty(where, "line", long[0], long[1], MAX_LINE_BYTES))


def read_as_empty(where: str, what: str, n: int, first: int, bound: int) -> str:
    """The warning for ``n`` lines or segments (``what``) of ``where`` longer than ``bound``
    bytes, the first at line ``first``, read as empty."""
    return (f"warning: {where}: {n:,} {what}{'s' if n > 1 else ''} longer than "
            f"{bound // 2**20} MiB (first: line {first}) read as empty: "
            f"{'their pairs are' if n > 1 else 'its pair is'} dropped")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def combined_sha256(parts: dict[str, str]) -> str:
    """One digest for several files: the SHA-256 of their names' roles and digests."""
    return sha256(json.dumps(parts, sort_keys=True).encode())


def resolve(spec: str, where: str = "data.corpus") -> Path:
    """A path in the config: ``~`` expanded (:func:`nmt.files.user_path`), relative to the
    working directory."""
    from nmt.files import user_path

    return user_path(spec, where)
