"""Python's formats: ``str.format`` fields (``{name}``, ``{}``, ``{0!r:>10}``, ``{user.name}``,
``{items[0]}``) and %-style mappings (``%(name)s``, ``%(count)5.2f``); the other %-formats
(``%s``, ``%5.2f``, ``%r``) are printf's (:mod:`nmt.data.spans.printf`).

``{{`` and ``}}`` are literal braces in ``str.format`` and are not fields. The text is read
from left to right as Python reads it, so ``{{{name}}}`` is a brace, the field ``{name}`` and a
brace.

The grammar is also what a PO entry flagged ``python-brace-format`` or ``python-format`` is
checked with (:mod:`nmt.localisation.placeholders`)."""

from __future__ import annotations

import re
from collections.abc import Iterator

PATTERN = re.compile(
    r"\{\{|\}\}"  # literal braces, read first: never part of a field
    r"|\{(?:[A-Za-z_]\w*|\d+)?(?:\.[A-Za-z_]\w*|\[[^\[\]{}\s]+\])*(?:![rsa])?"
    r"(?::[^{}\n]*(?:\{(?:[A-Za-z_]\w*|\d+)?\}[^{}\n]*)*)?\}"
    r"|%\([^()\s]+\)[-+#0 ]*(?:\d+|\*)?(?:\.\d+)?[hlL]?[diouxXeEfFgGcrsa]"
)


def find(text: str) -> Iterator[tuple[int, int]]:
    for m in PATTERN.finditer(text):
        if m[0] not in ("{{", "}}"):
            yield m.span()
