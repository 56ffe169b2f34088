"""Whether a translation keeps the placeholders its source has: the checks ``msgfmt -c`` makes
of a PO entry flagged ``c-format``, ``python-format`` or ``python-brace-format``.

What a placeholder is, is the protected spans' grammar, in one place: printf's directives
(:mod:`nmt.data.spans.printf`, with a space as a flag, as ``msgfmt`` reads a format string) and
Python's mappings and fields (:mod:`nmt.data.spans.python_format`); where two overlap, the
leftmost is read (:func:`nmt.data.spans.resolve`: ``%%(name)s`` is a percent sign and text).
Here is only what keeping them means.

A check is any ``check(source, translation) -> bool``; :data:`FORMAT_CHECKS` maps a PO flag to
its check, and a caller may add one of its own for every string (``check=`` of
:func:`nmt.localisation.fill_file`), such as a registry of protected spans.

The rules, stricter than ``msgfmt -c`` where that keeps them short (a translation they refuse is
left untranslated, never written broken):

- ``%`` formats (``c-format``, ``python-format``: one rule, as a C string holds no Python
  mapping): the directives (``%s``, ``%-10.3f``, ``%lld``, ``%1$s``, ``%(name)s``), ``%%``
  aside, are the same, each as written; those that name their argument (``%2$s``,
  ``%(name)s``) in any order, the others in the source's order (their order is the order of
  the arguments).
- Python braces (``python-brace-format``): the same fields (``{name}``, ``{0!r:>10}``), each
  as written, in any order; ``{{`` and ``}}`` are literal braces.
- Neither has more of its marks outside them than the source (a ``%`` that starts no
  directive, ``%(s) <``; a lone brace): formatting such a string fails.
"""

from __future__ import annotations

from collections.abc import Callable

from nmt.data.spans import Span, printf, python_format, resolve

Check = Callable[[str, str], bool]  # (source, translation) -> the translation may be written


def _percent_spans(text: str) -> list[Span]:
    """The ``%`` directives of ``text`` and its ``%%``, as a format string reads them."""
    spans = [Span(*m.span(), "printf", m[0]) for m in printf.IN_FORMAT_STRING.finditer(text)]
    spans += [Span(a, b, "python", text[a:b]) for a, b in python_format.find(text)
              if text[a] == "%"]
    return resolve(spans)


def printf_directives(text: str) -> list[str]:
    """The ``%`` directives of ``text`` (``%%`` aside) as a comparable list: those that name
    their argument sorted (their order is free), the others in order."""
    found = [s.text for s in _percent_spans(text) if s.text != "%%"]
    return [d for d in found if not _named(d)] + sorted(d for d in found if _named(d))


def _named(directive: str) -> bool:
    """``%2$s``, ``%(name)s``: a directive that names its argument, so its place is free."""
    return directive.startswith("%(") or not printf.in_order(directive)


def printf_kept(source: str, translation: str) -> bool:
    """``c-format`` and ``python-format``: the same directives (see the module's rules), and no
    more ``%`` outside them than the source has (``%(s) <`` is no directive: formatting it
    fails)."""
    def stray(text: str) -> int:  # each starts what no conversion ends (printf.remnants)
        return len(printf.remnants(text, [(x.start, x.end) for x in _percent_spans(text)]))

    return (printf_directives(source) == printf_directives(translation)
            and stray(translation) <= stray(source))


def brace_fields(text: str) -> list[str]:
    """The ``{...}`` fields of ``text``, sorted (``{{`` and ``}}`` are literal braces)."""
    return sorted(text[a:b] for a, b in python_format.find(text) if text[a] == "{")


def brace_kept(source: str, translation: str) -> bool:
    """``python-brace-format``: the same replacement fields, in any order, and no more braces
    outside them and ``{{``, ``}}`` than the source has (``{name`` fails to format)."""
    def stray(text: str) -> int:
        inside = [False] * len(text)
        for m in python_format.PATTERN.finditer(text):
            inside[m.start():m.end()] = [True] * (m.end() - m.start())
        return sum(c in "{}" and not inside[i] for i, c in enumerate(text))

    return brace_fields(source) == brace_fields(translation) and stray(translation) <= stray(
        source)


# a PO entry's flag -> the check its translation must pass; ``no-c-format`` and other flags
# name none
FORMAT_CHECKS: dict[str, Check] = {
    "c-format": printf_kept,
    "python-format": printf_kept,
    "python-brace-format": brace_kept,
}
