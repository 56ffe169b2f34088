"""Web addresses: ``https://example.org/a?b=1``, ``ftp://host/x``, ``www.example.org``.

Punctuation that ends the sentence is not part of the address (``see https://x.org.``), nor a
closing bracket the address does not open (``(https://x.org)``), nor the letters of a
script written without spaces (``https://x.orgを参照``: :mod:`nmt.data.spans.unspaced`)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from nmt.data.spans.unspaced import LETTERS, WORD

_REST = rf"[^\s<>\"'`{LETTERS}]"  # a character of the address after its scheme or host
PATTERN = re.compile(
    rf"(?<!{WORD})(?:https?|ftp|sftp|ssh|file|git)://{_REST}+"
    rf"|(?<!{WORD})www\.(?:{WORD}|-)+(?:\.(?:{WORD}|-)+)+(?:/{_REST}*)?"
)
_TRAILING = ".,;:!?'\"’”»"
_OPENING = {")": "(", "]": "[", "}": "{"}


def trim(text: str, start: int, end: int) -> int:
    """The end of the address ``text[start:end]`` without the punctuation that follows it."""
    # counted once (what is cut is never an opening bracket), so a long run of them is cut in
    # one pass
    unopened = {c: text.count(c, start, end) - text.count(o, start, end)
                for c, o in _OPENING.items()}
    while end > start:
        last = text[end - 1]
        if last in _TRAILING:
            end -= 1
        elif unopened.get(last, 0) > 0:
            unopened[last] -= 1
            end -= 1
        else:
            break
    return end


def find(text: str) -> Iterator[tuple[int, int]]:
    for m in PATTERN.finditer(text):
        yield m.start(), trim(text, m.start(), m.end())
