"""Command-line options: ``--force``, ``--output=FILE``, ``--no-color``, ``-x``, ``-rf``.

An option starts a word (``e-mail`` and ``well-known`` are words) and its name starts with a
letter (``-5`` is a number, ``- item`` a list)."""

from __future__ import annotations

import re
from collections.abc import Iterator

PATTERN = re.compile(
    r"(?<![\w\-/.])--[A-Za-z0-9][\w-]*\w(?:=[^\s,;)\]'\"`]+)?"
    r"|(?<![\w\-/.])--[A-Za-z0-9](?![\w-])"
    r"|(?<![\w\-/.'’])-[A-Za-z][A-Za-z0-9]{0,3}(?![\w-])"
)


def find(text: str) -> Iterator[tuple[int, int]]:
    for m in PATTERN.finditer(text):
        yield m.span()
