"""strftime and date formats (C, POSIX, Python's ``datetime``): ``%Y``, ``%b``, ``%H:%M``,
``%-d``, ``%^a``.

Many conversions are also printf's (``%a``, ``%d``, ``%e``, ``%s``, ``%x``...): the two kinds
find the same text there, and the registry's rule for ties keeps the kind listed first
(printf), so a date format's spans are the same whichever kinds a run keeps. ``%%`` is printf's.
A conversion followed by a letter (``50%Mbps``) is prose, not a span."""

from __future__ import annotations

import re
from collections.abc import Iterator

PATTERN = re.compile(r"%[-_0^#]?[aAbBcCdDeFgGhHIjklmMpPrRsSTuUVwWxXyYzZ](?![A-Za-z])")


def find(text: str) -> Iterator[tuple[int, int]]:
    for m in PATTERN.finditer(text):
        yield m.span()
