"""E-mail addresses: ``bugs@example.org``, ``first.last+tag@mail.example.co.uk``."""

from __future__ import annotations

import re
from collections.abc import Iterator

PATTERN = re.compile(r"(?<![\w.+-])[\w+-]+(?:\.[\w+-]+)*@[\w-]+(?:\.[\w-]+)+")


def find(text: str) -> Iterator[tuple[int, int]]:
    for m in PATTERN.finditer(text):
        yield m.span()
