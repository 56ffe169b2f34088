"""Whether a translation keeps the placeholders its source has: the checks ``msgfmt -c`` makes
of a PO entry flagged ``c-format``, ``python-format`` or ``python-brace-format``, one function
per flag, a regular expression each.

A check is any ``check(source, translation) -> bool``; :data:`FORMAT_CHECKS` maps a PO flag to
its check, and a caller may add one of its own for every string (``check=`` of
:func:`nmt.localisation.fill_file`), such as a registry of protected spans.

The rules, stricter than ``msgfmt -c`` where that keeps them short (a translation they refuse is
left untranslated, never written broken):

- printf (``c-format``): the directives (``%s``, ``%-10.3f``, ``%lld``, ``%1$s``), ``%%``
  aside, are the same; numbered ones (``%2$s``) in any order, the others in the source's order
  (their order is the order of the arguments).
- Python ``%`` (``python-format``): as printf, with named ones (``%(name)s``) in any order.
- Python braces (``python-brace-format``): the same fields (``{name}``, ``{0!r:>10}``), in any
  order; ``{{`` and ``}}`` are literal braces.
"""

from __future__ import annotations

import re
from collections.abc import Callable

Check = Callable[[str, str], bool]  # (source, translation) -> the translation may be written

_PRINTF = re.compile(
    r"%(?:(?P<number>[1-9][0-9]*)\$|\((?P<name>[^)]*)\))?"  # %1$s, or Python's %(name)s
    r"[-+ #0']*(?:\*|[0-9]+)?(?:\.(?:\*|[0-9]+))?"  # flags, width, precision
    r"(?:hh|h|ll|l|L|q|j|z|Z|t|I64|I32|I)?"  # length
    r"(?P<conversion>[diouxXeEfFgGaAcspnCSr%])")
_BRACE = re.compile(r"\{\{|\}\}|\{[^{}]*\}")


def printf_directives(text: str) -> list[str]:
    """The printf directives of ``text`` (``%%`` aside) as a comparable list: numbered and
    named ones sorted (their order is free), the others in order."""
    found = [m for m in _PRINTF.finditer(text) if m["conversion"] != "%"]
    keyed = [m[0] for m in found if m["number"] or m["name"] is not None]
    plain = [m[0] for m in found if not (m["number"] or m["name"] is not None)]
    return plain + sorted(keyed)


def printf_kept(source: str, translation: str) -> bool:
    """``c-format`` and ``python-format``: the same directives (see the module's rules)."""
    return printf_directives(source) == printf_directives(translation)


def brace_fields(text: str) -> list[str]:
    """The ``{...}`` fields of ``text``, sorted (``{{`` and ``}}`` are literal braces)."""
    return sorted(f for f in _BRACE.findall(text) if f not in ("{{", "}}"))


def brace_kept(source: str, translation: str) -> bool:
    """``python-brace-format``: the same replacement fields, in any order."""
    return brace_fields(source) == brace_fields(translation)


# a PO entry's flag -> the check its translation must pass; ``no-c-format`` and other flags
# name none
FORMAT_CHECKS: dict[str, Check] = {
    "c-format": printf_kept,
    "python-format": printf_kept,
    "python-brace-format": brace_kept,
}
