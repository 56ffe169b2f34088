"""E-mail addresses: ``bugs@example.org``, ``first.last+tag@mail.example.co.uk``; none of
the letters of a script written without spaces around it (``bugs@example.orgに送信``:
:mod:`nmt.data.spans.unspaced`)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from nmt.data.spans.unspaced import WORD

_LOCAL = rf"(?:{WORD}|[+-])+"  # a part of the name before the @
_DOMAIN = rf"(?:{WORD}|-)+"  # a part of the domain
PATTERN = re.compile(rf"(?<!{WORD})(?<![.+-]){_LOCAL}(?:\.{_LOCAL})*@{_DOMAIN}(?:\.{_DOMAIN})+")


def find(text: str) -> Iterator[tuple[int, int]]:
    for m in PATTERN.finditer(text):
        yield m.span()
