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
BRACE = re.compile(r"[{}]")


def _closings(text: str) -> dict[int, int]:
    """Each ``{`` of ``text`` that a ``}`` closes -> the index after that ``}``: one pass, the
    braces paired as they nest."""
    pairs: dict[int, int] = {}
    opened: list[int] = []
    for m in BRACE.finditer(text):
        if m.group() == "{":
            opened.append(m.start())
        elif opened:
            pairs[opened.pop()] = m.end()
    return pairs


def find(text: str) -> Iterator[tuple[int, int]]:
    for m in SIMPLE.finditer(text):
        yield m.span()
    closings: dict[int, int] | None = None
    for m in BLOCK_START.finditer(text):
        closings = _closings(text) if closings is None else closings
        end = closings.get(m.start())
        if end is not None and end - m.start() <= MAX_BLOCK:
            yield m.start(), end
