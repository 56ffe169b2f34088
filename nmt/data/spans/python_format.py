"""Python's formats: ``str.format`` fields (``{name}``, ``{}``, ``{0!r:>10}``, ``{user.name}``,
``{items[0]}``) and %-style mappings (``%(name)s``, ``%(count)5.2f``).

``{{`` and ``}}`` are literal braces in ``str.format`` and are not fields."""

from __future__ import annotations

import re
from collections.abc import Iterator

PATTERN = re.compile(
    r"(?<!\{)\{(?:[A-Za-z_]\w*|\d+)?(?:\.[A-Za-z_]\w*|\[[^\[\]{}\s]+\])*(?:![rsa])?"
    r"(?::[^{}\n]*(?:\{(?:[A-Za-z_]\w*|\d+)?\}[^{}\n]*)*)?\}(?!\})"
    r"|%\([^()\s]+\)[-+#0 ]*(?:\d+|\*)?(?:\.\d+)?[diouxXeEfFgGcrsa]"
)


def find(text: str) -> Iterator[tuple[int, int]]:
    for m in PATTERN.finditer(text):
        yield m.span()
