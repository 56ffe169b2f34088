"""printf conversions, C and POSIX: ``%s``, ``%d``, ``%-10.3f``, ``%1$s``, ``%*d``, ``%lu``,
and ``%%`` (a literal percent sign, which a format string must keep doubled).

A space flag is not read (``100% sure`` is prose, not ``% s``), nor a ``%`` at the end of a
line or before anything that is not a conversion (``50% off``): those are left as text."""

from __future__ import annotations

import re
from collections.abc import Iterator

_ARG = r"(?:[1-9]\d*\$)?"  # a numbered argument: %1$s
PATTERN = re.compile(
    r"%%"
    rf"|%{_ARG}[-+#0']*(?:\d+|\*{_ARG})?(?:\.(?:\d+|\*{_ARG}))?"
    r"(?:hh|h|ll|l|L|q|j|z|Z|t|I64|I32)?[diouxXeEfFgGaAcspn]"
)


def find(text: str) -> Iterator[tuple[int, int]]:
    for m in PATTERN.finditer(text):
        yield m.span()
