"""File paths: absolute (``/usr/bin/x``, ``/etc``), from home or here (``~/.config/nmt``,
``./configure``, ``../x``), Windows (``C:\\x\\y.txt``, ``\\\\server\\share``), and relative
ones that end in a file name with an extension (``docs/DATA.md``, ``src/main.c``).

Two words joined by a slash are not a path: ``Install/Remove``, ``n/a``, ``input/output``,
``km/h`` and ``and/or`` stay text (a slash after a letter, a digit or a closing bracket
starts no path: ``(Japanese)/Japanese``)."""

from __future__ import annotations

import re
from collections.abc import Iterator

_PART = r"[\w.@+~-]+"
PATTERN = re.compile(
    rf"(?<![\w/\\:<.~$@%)\]-])(?:~|\.{{1,2}})?/(?:{_PART}/)*{_PART}/?"  # /usr/bin/x, ~/.config
    r"|(?<![\w\\])[A-Za-z]:\\(?:[^\\\s:*?\"<>|]+\\)*[^\\\s:*?\"<>|]*"  # C:\x\y.txt
    r"|(?<![\w\\])\\\\[\w.$-]+(?:\\[\w.$-]+)+"  # \\server\share
    rf"|(?<![\w/\\.@-])(?:[\w-]+/)+[\w-]+\.[A-Za-z][A-Za-z0-9]{{0,5}}(?![\w/])"  # docs/DATA.md
)


def find(text: str) -> Iterator[tuple[int, int]]:
    for m in PATTERN.finditer(text):
        start, end = m.span()
        while end > start and text[end - 1] in ".,;:!?":  # the sentence's, not the path's
            end -= 1
        if end - start > 1:
            yield start, end
