"""Terms kept as written: product names, commands, anything a glossary lists (``Firefox``,
``GNOME Shell``, ``Ctrl+S``), from the file ``data.glossary`` (UTF-8 text, one term a line)
and the list ``data.terms``.

A term matches as written (case and all), where it is not part of a longer word (the letters
of a script written without spaces make none: ``Firefoxを起動``,
:mod:`nmt.data.spans.unspaced`); where two terms start at one place, the longer is the
span."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from nmt.data.spans.unspaced import WORD
from nmt.errors import ConfigError

MAX_BYTES = 1 << 20  # a glossary larger than this is not a list of terms
MAX_TERM = 200  # characters in one term


def read_glossary(path: Path, where: str = "data.glossary") -> tuple[str, ...]:
    """The terms of a glossary file: one a line, blank lines skipped, spaces around a term
    dropped. A one-line :class:`ConfigError` naming ``where`` for anything that is not a small
    UTF-8 text file (missing, a directory, a FIFO or a device, binary, over 1 MiB, a line over
    200 characters)."""
    try:
        info = os.stat(path)
    except OSError as e:
        reason = "file not found" if isinstance(e, FileNotFoundError) else (
            f"cannot read ({e.strerror or e})")
        raise ConfigError(f"{where} {path}: {reason}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{where} {path}: not a regular file; expected a text file of terms, "
                          "one a line")
    if info.st_size > MAX_BYTES:
        raise ConfigError(f"{where} {path}: {info.st_size:,} bytes; expected a list of terms "
                          f"under {MAX_BYTES:,} bytes")
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"{where} {path}: cannot read ({e.strerror or e})") from None
    if len(raw) > MAX_BYTES:
        raise ConfigError(f"{where} {path}: over {MAX_BYTES:,} bytes; expected a list of terms")
    if b"\0" in raw:
        raise ConfigError(f"{where} {path}: binary (a NUL byte); expected UTF-8 text, one term "
                          "a line")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise ConfigError(f"{where} {path}: line {line}: not valid UTF-8; expected UTF-8 text, "
                          "one term a line") from None
    return check_terms(text.splitlines(), f"{where} {path}")


def check_terms(lines: Sequence[str], where: str) -> tuple[str, ...]:
    """Terms as given (spaces around them dropped, blank ones skipped, each once), or a
    one-line :class:`ConfigError` for a term that is too long or holds control characters."""
    terms: dict[str, None] = {}
    for number, line in enumerate(lines, 1):
        term = line.strip()
        if not term:
            continue
        if len(term) > MAX_TERM:
            raise ConfigError(f"{where}: line {number}: {len(term)} characters; expected a term "
                              f"of at most {MAX_TERM}")
        if not term.isprintable():
            raise ConfigError(f"{where}: line {number}: control characters; expected a term "
                              "as written in text")
        terms[term] = None
    return tuple(terms)


def finder(terms: Sequence[str]) -> Callable[[str], Iterator[tuple[int, int]]]:
    """The find function of ``terms`` (longest first where two start at one place)."""
    if not terms:
        return lambda text: iter(())
    ordered = sorted(terms, key=len, reverse=True)
    pattern = re.compile(rf"(?<!{WORD})(?:" + "|".join(re.escape(t) for t in ordered)
                         + rf")(?!{WORD})")

    def find(text: str) -> Iterator[tuple[int, int]]:
        for m in pattern.finditer(text):
            yield m.span()

    return find
