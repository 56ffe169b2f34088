"""ICU MessageFormat and .NET composite formats: ``{0}``, ``{0,-10}``, ``{0:N2}``, and an ICU
argument with a type kept whole, nested messages and all: ``{count, plural, one {# file}
other {# files}}``, ``{gender, select, female {she} other {they}}``.

A block whose braces do not balance is not a span (it is left as text, as written)."""

from __future__ import annotations

import re
from collections.abc import Iterator

SIMPLE = re.compile(r"\{\d+(?:\s*,\s*-?\d+)?(?::[^{}\n]*)?\}")
BLOCK_START = re.compile(
    r"\{\s*[\w.]+\s*,\s*(?:plural|select|selectordinal|choice|number|date|time|spellout|"
    r"ordinal|duration)\b")
MAX_BLOCK = 10_000  # characters an ICU block may span before it is taken for text


def _closing(text: str, start: int) -> int | None:
    """The index after the brace that closes the one at ``start``, or None."""
    depth = 0
    for i in range(start, min(len(text), start + MAX_BLOCK)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def find(text: str) -> Iterator[tuple[int, int]]:
    for m in SIMPLE.finditer(text):
        yield m.span()
    for m in BLOCK_START.finditer(text):
        end = _closing(text, m.start())
        if end is not None:
            yield m.start(), end
