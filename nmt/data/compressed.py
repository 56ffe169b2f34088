"""Compressed corpus files: gzip, bzip2 and xz read as the text they hold, a piece at a time.

Parallel data is published compressed (OPUS's ``en-fr.tmx.gz``, WMT's and Marian's
``train.de.gz``, ``news.en.xz``), and is far too large to unpack by hand first. Every file a
corpus form reads goes through :func:`open_file`, which knows a compressed file by its first
bytes (a ``.gz`` name is not needed, and a ``.gz`` name on a file that is not gzip is an
error), and the forms accept these names with a compression suffix (:func:`plain_name`):
``train.en.gz``, ``pairs.tsv.xz``, ``memory.tmx.gz``, ``deu.txt.bz2``.

Bounds, whatever the file: nothing is unpacked to disk or held whole (the readers above read
lines and pieces of it); a stream that gives more than :data:`MAX_RATIO` times the compressed
bytes read so far, past the first :data:`FREE_BYTES`, is refused as a decompression bomb
(text compresses 3 to 10 times), so the time a file takes stays proportional to its size. A
damaged or cut-short stream is one line naming the file. The same check guards a member read
out of a zip archive (:func:`checked`: OPUS archives, Argos data packages). ``nmt translate``
and ``nmt backtranslate`` open their ``--input`` here too.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import re
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from nmt.errors import DataError


class Readable(Protocol):
    """A stream of bytes to read: a decompressing file, a zip archive's member."""

    def read(self, size: int = -1, /) -> bytes: ...

    def close(self) -> None: ...


# name suffix -> (the format's name, its first bytes, how to open a stream of it); the first
# bytes in full, so that no text is taken for one (a line may start "BZh")
# (typeshed wants IO[bytes] where a reader with read() is all these use)
FORMATS: dict[str, tuple[str, re.Pattern[bytes], Callable[[Any], Readable]]] = {
    ".gz": ("gzip", re.compile(rb"\x1f\x8b\x08"),  # deflate, gzip's one method
            lambda f: gzip.GzipFile(fileobj=f, mode="rb")),
    ".bz2": ("bzip2", re.compile(rb"BZh[1-9](?:1AY&SY|\x17rE8P\x90)"),  # a block or the end
             lambda f: bz2.BZ2File(f, "rb")),
    ".xz": ("xz", re.compile(rb"\xfd7zXZ\x00"), lambda f: lzma.LZMAFile(f, "rb")),
}
MAX_RATIO = 200  # decompressed bytes per compressed byte, at most
FREE_BYTES = 16 * 2**20  # decompressed before the ratio applies (a small file may compress well)
# what a damaged stream raises: gzip.BadGzipFile and bz2's "Invalid data stream" are OSErrors
# and a zip member's zipfile.BadZipFile (a CRC that does not match)
_DAMAGED = (OSError, EOFError, zlib.error, lzma.LZMAError, zipfile.BadZipFile)


def suffix_of(name: str) -> str | None:
    """The compression suffix ``name`` ends with, in any case (``.gz``), or None."""
    return next((suffix for suffix in FORMATS if name.lower().endswith(suffix)), None)


def plain_name(name: str) -> str:
    """``name`` without a compression suffix: ``train.en.gz`` -> ``train.en``."""
    suffix = suffix_of(name)
    return name[: -len(suffix)] if suffix else name


def compressed_names(path: str) -> list[str]:
    """The names a file ``path`` may have: itself, then with each compression suffix."""
    return [path] + [path + suffix for suffix in FORMATS]


def format_of(head: bytes) -> str | None:
    """The suffix of the compression whose magic ``head`` starts with (None: none)."""
    return next((suffix for suffix, (_, magic, _) in FORMATS.items() if magic.match(head)),
                None)


def open_file(path: Path, where: str) -> BinaryIO:
    """``path`` opened for reading its text: decompressed as it is read when its first bytes
    are those of gzip, bzip2 or xz (with the module's bounds), as it is otherwise; a FIFO too
    (its first bytes are looked at, not taken). A name that says compressed on a file that is
    not is a :class:`DataError`; an :class:`OSError` opening it is the caller's to word."""
    f = path.open("rb")
    try:
        head = f.peek(10)[:10]
        found = format_of(head)
        said = suffix_of(path.name)
        if said and found != said:
            raise DataError(f"{where}: not {FORMATS[said][0]}-compressed data, though its "
                            f"name ends in {said} (its first bytes are {head[:4]!r})")
    except BaseException:
        f.close()
        raise
    if found is None:
        return f
    counted = _Counted(f)
    return checked(FORMATS[found][2](counted), counted, where, FORMATS[found][0])


def checked(stream: Readable, compressed: _Counted | int, where: str, kind: str) -> BinaryIO:
    """``stream`` (decompressing ``compressed``: the file it reads, counting, or the number of
    compressed bytes it holds) as a buffered stream whose reads stop a decompression bomb and
    turn a damaged stream into one :class:`DataError` naming ``where``."""
    return io.BufferedReader(_Bounded(stream, compressed, where, kind), buffer_size=1 << 16)


class _Counted:
    """A compressed file as a decompressor reads it, counting the bytes it takes."""

    def __init__(self, f: BinaryIO) -> None:
        self.f, self.count = f, 0

    def read(self, size: int = -1, /) -> bytes:
        data = self.f.read(size)
        self.count += len(data)
        return data

    def close(self) -> None:
        self.f.close()


class _Bounded(io.RawIOBase):
    def __init__(self, stream: Readable, compressed: _Counted | int, where: str,
                 kind: str) -> None:
        self.stream, self.compressed, self.where, self.kind = stream, compressed, where, kind
        self.out = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        try:
            data = self.stream.read(len(buffer))
        except _DAMAGED as e:
            reason = str(e) or type(e).__name__
            raise DataError(f"{self.where}: damaged or cut-short {self.kind} data "
                            f"({reason})") from None
        n = len(data)
        buffer[:n] = data
        self.out += n
        if self.out > FREE_BYTES:
            read = (self.compressed if isinstance(self.compressed, int)
                    else self.compressed.count)
            if self.out > MAX_RATIO * max(read, 1):
                raise DataError(f"{self.where}: more than {MAX_RATIO} times its compressed "
                                f"size once decompressed ({self.out:,} bytes from {read:,}); "
                                "refused as a decompression bomb")
        return n

    def close(self) -> None:
        if not self.closed:
            try:
                self.stream.close()
                if not isinstance(self.compressed, int):
                    self.compressed.close()
            finally:
                super().close()
