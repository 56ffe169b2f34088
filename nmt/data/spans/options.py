"""Command-line options: ``--force``, ``--color=auto``, ``--no-color``, ``-x``, ``-rf``.

An option starts a word (``e-mail`` and ``well-known`` are words), or stands in quotes
(``'-a'``, ``« -e »``), and its name starts with a letter (``-5`` is a number, ``- item`` a
list). A value given with ``=`` is part of the span when it is a literal (``--color=auto``);
a metavariable that names what to give (``--output=FILE``, ``--tool=<tool>``, ``--x=[N]``:
capitals, or in brackets) is text that translators translate, and the span ends at the
``=``. An option ends where the letters of a script written without spaces start
(``--forceを使う``: :mod:`nmt.data.spans.unspaced`)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from nmt.data.spans.unspaced import LETTERS, WORD

PATTERN = re.compile(
    rf"(?<!{WORD})(?<![\-/.])--[A-Za-z0-9](?:{WORD}|-)*{WORD}"
    rf"(?:=(?P<value>[^\s,;)\]'\"`{LETTERS}]*))?"
    rf"|(?<!{WORD})(?<![\-/.])--[A-Za-z0-9](?!{WORD}|-)"
    rf"|(?<!{WORD})(?<![\-/.)\]])(?<!{WORD}['’])-[A-Za-z][A-Za-z0-9]{{0,3}}(?!{WORD}|-)"
)


def _metavariable(value: str) -> bool:
    """``FILE``, ``CHAÎNE_CONNEX``, ``<tool>``, ``[N]``: what to give, in capitals or brackets."""
    return value.isupper() or value[:1] in ("<", "[")


def find(text: str) -> Iterator[tuple[int, int]]:
    for m in PATTERN.finditer(text):
        if m["value"] and _metavariable(m["value"]):
            yield m.start(), m.start("value")
        else:
            yield m.span()
