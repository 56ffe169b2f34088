"""File paths: absolute (``/usr/bin/x``, ``/etc``), from home or here (``~/.config/nmt``,
``./configure``, ``../x``), Windows (``C:\\x\\y.txt``, ``\\\\server\\share``), and relative
ones that end in a file name with an extension (``docs/DATA.md``, ``src/main.c``).

Two words joined by a slash are not a path: ``Install/Remove``, ``n/a``, ``input/output``,
``km/h`` and ``and/or`` stay text (a slash after a letter, a digit or a closing bracket
starts no path: ``(Japanese)/Japanese``). A path ends where the letters of a script written
without spaces start (``/proc/net/snmpを開けません``: :mod:`nmt.data.spans.unspaced`), but a
slash after them starts none, as after any letter (``32ビット/64ビット``)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from nmt.data.spans.unspaced import LETTERS, WORD

_PART = rf"(?:{WORD}|[.@+~-])+"
_NAME = rf"(?:{WORD}|-)+"
_WINDOWS = rf"[^\\\s:*?\"<>|{LETTERS}]"  # a character of a Windows path
PATTERN = re.compile(
    rf"(?<![\w/\\:<.~$@%)\]-])(?:~|\.{{1,2}})?/(?:{_PART}/)*{_PART}/?"  # /usr/bin/x
    rf"|(?<!{WORD})(?<!\\)[A-Za-z]:\\(?:{_WINDOWS}+\\)*{_WINDOWS}*"  # C:\x\y.txt
    rf"|(?<!{WORD})(?<!\\)\\\\(?:{WORD}|[.$-])+(?:\\(?:{WORD}|[.$-])+)+"  # \\server\share
    rf"|(?<!{WORD})(?<![/\\.@-])(?:{_NAME}/)+{_NAME}\.[A-Za-z][A-Za-z0-9]{{0,5}}"  # docs/DATA.md
    rf"(?!{WORD}|/)"
)


def find(text: str) -> Iterator[tuple[int, int]]:
    for m in PATTERN.finditer(text):
        start, end = m.span()
        while end > start and text[end - 1] in ".,;:!?":  # the sentence's, not the path's
            end -= 1
        if end - start > 1:
            yield start, end
