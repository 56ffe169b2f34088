"""XML and HTML tags, each one a span: ``<b>``, ``</b>``, ``<br/>``, ``<a href="x.html">``,
``<x:ph id="1"/>``, and comments ``<!-- ... -->``.

Tags are kept one by one; a tag opened and not closed (``<b>Save``) keeps the tag it has.
A ``<`` not followed by a name (``a < b``) is text, and so is ``<unk>``, the mark a word
tokenizer writes for a word it does not know."""

from __future__ import annotations

import re
from collections.abc import Iterator

_VALUE = r"""(?:"[^"<>\n]*"|'[^'<>\n]*'|[^\s"'=<>`]+)"""
PATTERN = re.compile(
    rf"</?(?!unk>)[A-Za-z][\w:.-]*(?:\s+[A-Za-z_:][\w:.-]*(?:\s*=\s*{_VALUE})?)*\s*/?>"
    r"|<!--(?:(?!<!--|-->).)*-->"  # a comment holds no other: a text of openings is read once
)


def find(text: str) -> Iterator[tuple[int, int]]:
    for m in PATTERN.finditer(text):
        yield m.span()
