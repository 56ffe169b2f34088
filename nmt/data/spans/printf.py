"""printf conversions, C and POSIX: ``%s``, ``%d``, ``%-10.3f``, ``%1$s``, ``%*d``, ``%lu``,
``%'d`` (digits grouped), ``%Id`` (glibc's locale digits, or Microsoft's size), the old wide
``%C`` and ``%S``, Python's ``%r``, ``%<PRIu64>`` (how gettext writes ``"%" PRIu64`` of
``<inttypes.h>``), and ``%%`` (a literal percent sign, which a format string must keep doubled).

A pointer conversion with the extension a capital letter names is one directive: binutils'
``%pA`` (a section), ``%pB`` (an object file), ``%pT`` (a symbol), the Linux kernel's
``%pS``, ``%pI4``. Its printf reads ``%pB`` whole, so ``%p B`` or ``%pb`` in a translation
prints a raw pointer where the name of a file belongs (1.3% of the French strings of Debian's
catalogues hold one). ``msgfmt -c`` reads ``%p`` and a letter; a translation that keeps the
directive passes both.

A space flag is not read (``100% sure`` is prose, not ``% s``), nor a ``%`` at the end of a
line or before anything that is not a conversion (``50% off``): those are left as text.

The grammar is also what a PO entry flagged ``c-format`` or ``python-format`` is checked with
(:mod:`nmt.localisation.placeholders`): in a string known to be a format string a space is a
flag, as ``msgfmt -c`` reads it (:data:`IN_FORMAT_STRING`). ``%m`` (glibc's error text, which
takes no argument) is not read: it is strftime's month (:mod:`nmt.data.spans.strftime`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

_ARG = r"(?:[1-9]\d*\$)?"  # a numbered argument: %1$s, %*2$d
_LENGTH = r"(?:hh|h|ll|l|L|q|j|z|Z|t|I64|I32|I)?"
_INTTYPES = r"<PRI[diouxX](?:MAX|PTR|(?:LEAST|FAST)?(?:8|16|32|64))>"  # %<PRIu64>
_FLAGS = "-+#0'I"


def _directive(flags: str) -> re.Pattern[str]:
    return re.compile(
        r"%%"
        rf"|%{_ARG}[{flags}]*(?:\d+|\*{_ARG})?(?:\.(?:\d+|\*{_ARG}))?"
        rf"(?:{_LENGTH}(?:[diouxXeEfFgGaAcCsSnr]|p(?:[A-Z][A-Z0-9]*)?)|{_INTTYPES})"
    )


PATTERN = _directive(_FLAGS)  # in any text
IN_FORMAT_STRING = _directive(_FLAGS + " ")  # in a format string: a space is a flag too


# the start of a directive that no conversion ends (``%33``, ``%ll``, ``%.*``, a ``%`` alone):
# what is left of one a model garbled
_REMNANT = re.compile(rf"%{_ARG}[-+#0']*(?:\d+|\*)?(?:\.(?:\d+|\*)?)?{_LENGTH}")


def remnants(text: str, spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Where ``text`` holds the start of a directive that no conversion ends, outside its
    ``spans`` (a URL's ``%20``, a directive): ``%33 %3u`` -> ``%33``; ``50 %`` -> ``%``."""
    inside = [False] * (len(text) + 1)
    for a, b in spans:
        inside[a:b] = [True] * (b - a)
    return [m.span() for m in _REMNANT.finditer(text)
            if not inside[m.start()]]


def in_order(directive: str) -> bool:
    """Whether ``directive`` takes the next of the arguments (``%s``, ``%-5d``, ``%*s``), so
    that its place among such directives is its argument's: not ``%%``, not one that numbers
    its argument (``%2$s``)."""
    return directive != "%%" and "$" not in directive


def find(text: str) -> Iterator[tuple[int, int]]:
    for m in PATTERN.finditer(text):
        yield m.span()
