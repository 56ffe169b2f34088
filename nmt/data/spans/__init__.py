"""Protected spans: the parts of a text that a translation must keep exactly as written
(placeholders, markup, options, addresses, paths, terms), one kind per module.

A kind is one function ``find(text) -> (start, end), ...`` in its own module, registered in
:data:`KINDS` with what it keeps and a few examples (docs/DATA.md lists them).
``data.spans`` chooses the kinds as ``data.filters`` chooses filters (:func:`parse`):

- ``"default"``: every kind but ``terms``, and ``terms`` too when ``data.glossary`` or
  ``data.terms`` gives any; ``"none"``: no kind;
- a list: ``"NAME"`` adds a kind, ``"-NAME"`` takes one away, after ``"default"`` when the
  list starts with it (``["default", "-options"]``).

Where spans of several kinds overlap, one rule decides (:func:`resolve`): the leftmost wins,
then the longest, then the kind listed first in :data:`KINDS`. So ``{{ name }}`` is one template
field, not a Python field inside braces, and ``https://x.org/a`` one address, not a path.

:func:`mask` and :func:`unmask` put indexed sentinels (``｟0｠``, ``｟1｠``) in place of the
spans and back, for a model trained to carry sentinels.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nmt.data.spans import (
    emails,
    icu,
    options,
    paths,
    printf,
    python_format,
    shell,
    strftime,
    tags,
    terms,
    urls,
)
from nmt.errors import ConfigError, shown

Finder = Callable[[str], Iterator[tuple[int, int]]]


@dataclass(frozen=True)
class Kind:
    find: Finder | None  # None: the terms, whose finder is made from the terms given
    what: str  # what it keeps, for docs and messages
    examples: tuple[str, ...]  # texts that are one span each (tested)


# name -> kind; the order breaks ties between spans of equal place and length
KINDS: dict[str, Kind] = {
    "terms": Kind(None, "terms of data.glossary and data.terms, as written",
                  ("Firefox", "GNOME Shell")),
    "tags": Kind(tags.find, "XML and HTML tags", ("<b>", "</b>", "<br/>", '<a href="x.html">')),
    "urls": Kind(urls.find, "web addresses", ("https://example.org/a?b=1", "www.example.org")),
    "emails": Kind(emails.find, "e-mail addresses", ("bugs@example.org",)),
    "icu": Kind(icu.find, "ICU and .NET message arguments",
                ("{0}", "{0,-10}", "{count, plural, one {# file} other {# files}}")),
    "shell": Kind(shell.find, "shell variables and template fields",
                  ("${HOME}", "$PATH", "{{ user.name }}", "{% if x %}")),
    "python": Kind(python_format.find, "Python format fields",
                   ("{name}", "{}", "{0!r:>10}", "%(name)s")),
    "printf": Kind(printf.find, "printf conversions",
                   ("%s", "%-10.3f", "%1$s", "%lu", "%'d", "%Id", "%S", "%r", "%<PRIu64>", "%%")),
    "strftime": Kind(strftime.find, "date and time formats", ("%Y", "%b", "%-m", "%H")),
    "options": Kind(options.find, "command-line options", ("--force", "--color=auto", "-x")),
    "paths": Kind(paths.find, "file paths", ("/usr/bin/x", "~/.config", "C:\\x\\y.txt",
                                            "./configure", "docs/DATA.md")),
}
DEFAULT_OFF = ("terms",)  # in "default" only when terms are given


def parse(spec: str, have_terms: bool = False) -> tuple[str, ...]:
    """``data.spans`` (a comma list, see the module docstring) -> the kinds, in
    :data:`KINDS`' order. ``have_terms``: ``data.glossary`` or ``data.terms`` gives terms.
    A ValueError says what is wrong."""
    items = [item.strip() for item in spec.split(",")]
    chosen: set[str] = set()
    for i, item in enumerate(items):
        if item in ("default", "none"):
            if i:
                raise ValueError(f"{item!r} may only come first")
            if item == "default":
                chosen = {k for k in KINDS if k not in DEFAULT_OFF or have_terms}
            continue
        name = item[1:] if item.startswith("-") else item
        if name not in KINDS:
            raise ValueError(f"unknown kind {shown(name, 40)}; expected default, none, or names "
                             f"among {', '.join(KINDS)}")
        if item.startswith("-"):
            chosen.discard(name)
            continue
        if name == "terms" and not have_terms:
            raise ValueError("terms: expected data.glossary (a file of terms) or data.terms "
                             "(a list) to say which")
        chosen.add(name)
    return tuple(k for k in KINDS if k in chosen)


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    kind: str
    text: str  # what the text holds at [start, end)


def resolve(candidates: Iterable[Span]) -> list[Span]:
    """Spans that do not overlap, in the order of the text: the leftmost candidate wins, then
    the longest, then the kind first in :data:`KINDS` (another, such as a sentinel, last)."""
    order = {name: i for i, name in enumerate(KINDS)}
    kept: list[Span] = []
    end = 0
    for span in sorted(candidates, key=lambda s: (s.start, s.start - s.end,
                                                  order.get(s.kind, len(order)))):
        if span.start >= end:
            kept.append(span)
            end = span.end
    return kept


@dataclass(frozen=True)
class SpanRules:
    """Which kinds are spans, and the terms: what a run keeps (its ``data.spans``,
    ``data.glossary`` and ``data.terms``)."""

    kinds: tuple[str, ...] = ()
    terms: tuple[str, ...] = ()
    _finders: tuple[tuple[str, Finder], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        finders = tuple((k, KINDS[k].find or terms.finder(self.terms)) for k in self.kinds)
        object.__setattr__(self, "_finders", finders)

    def find(self, text: str) -> list[Span]:
        """The spans of ``text``: they never overlap and come in the order of the text."""
        return resolve(Span(a, b, kind, text[a:b]) for kind, find in self._finders
                       for a, b in find(text) if b > a)


def misplaced_tags(wanted: Sequence[Span], got: Sequence[Span]) -> list[Span]:
    """The tags of ``got`` (a translation's spans) not nested as those of ``wanted`` (its
    source's): those :func:`tags.unpaired` finds, beyond as many of each as the source leaves
    unpaired too (a fragment that opens ``<b>`` and does not close it may stay so)."""
    def unpaired(spans: Sequence[Span]) -> list[Span]:
        marks = [s for s in spans if s.kind == "tags"]
        return [marks[i] for i in tags.unpaired([s.text for s in marks])]

    allowed = Counter(s.text for s in unpaired(wanted))
    out = []
    for s in unpaired(got):
        if allowed[s.text]:
            allowed[s.text] -= 1
        else:
            out.append(s)
    return out


def holds_exactly(wanted: Sequence[Span], got: Sequence[Span]) -> bool:
    """Whether a translation's spans ``got`` are exactly its source's ``wanted``: the same
    spans as many times each, its tags nested as the source's (:func:`misplaced_tags`)."""
    return (Counter(s.text for s in got) == Counter(s.text for s in wanted)
            and not misplaced_tags(wanted, got))


def argument_order(spans: Sequence[Span]) -> list[str]:
    """The printf directives of ``spans`` that take the next argument (:func:`printf.in_order`),
    in their order: the order of the arguments a program gives them."""
    return [s.text for s in spans if s.kind == "printf" and printf.in_order(s.text)]


def holds_in_order(wanted: Sequence[Span], got: Sequence[Span]) -> bool:
    """:func:`holds_exactly`, and the directives that take the next argument in the source's
    order (``%d ... %s`` for ``%s ... %d`` reads a number as a string): a line exact."""
    return holds_exactly(wanted, got) and argument_order(wanted) == argument_order(got)


def find_spans(text: str, kinds: Sequence[str] = (), terms: Sequence[str] = ()) -> list[Span]:
    """The spans of ``text`` of the kinds named (default: every kind but terms), with
    ``terms`` for the kind ``terms``."""
    chosen = tuple(kinds) or parse("default", have_terms=bool(terms))
    return SpanRules(chosen, tuple(terms)).find(text)


def rules(spec: str, glossary: str = "", term_list: str = "",
          where: str = "data.glossary", base: Path | None = None) -> SpanRules:
    """The rules of a run's ``data.spans``, ``data.glossary`` (a file, read here; relative to
    ``base`` when given) and ``data.terms`` (a comma list). A one-line :class:`ConfigError`
    for a glossary that is not a small text file or a list that is not terms."""
    found: tuple[str, ...] = ()
    if glossary:
        path = Path(glossary)
        if base is not None and not path.is_absolute():
            path = base / path
        found = terms.read_glossary(path, where)
    if term_list:
        found = terms.check_terms([*found, *term_list.split(",")], "data.terms")
    try:
        kinds = parse(spec, have_terms=bool(glossary or term_list))
    except ValueError as e:
        raise ConfigError(f"data.spans: {e}") from None
    return SpanRules(kinds, found)


# --- sentinels ---------------------------------------------------------------------------------

SENTINEL = re.compile(r"｟(\d{1,9})｠")  # an index: more digits are text, never a number


def sentinel(index: int) -> str:
    return f"｟{index}｠"


def mask(text: str, spans: Sequence[Span]) -> tuple[str, list[str]]:
    """``text`` with its ``spans`` (from :meth:`SpanRules.find`) replaced by ``｟0｠``,
    ``｟1｠``... in order, and the texts they stand for. A sentinel the text itself holds is
    masked too (it stands for itself), so :func:`unmask` gives the text back."""
    written = [Span(m.start(), m.end(), "sentinel", m.group()) for m in SENTINEL.finditer(text)]
    if written:
        spans = resolve([*spans, *written])
    out, last = [], 0
    for i, span in enumerate(spans):
        out += [text[last:span.start], sentinel(i)]
        last = span.end
    out.append(text[last:])
    return "".join(out), [s.text for s in spans]


def unmask(text: str, originals: Sequence[str]) -> str:
    """The sentinels of ``text`` replaced by the texts they stand for (:func:`mask`); a
    sentinel of no span stays as it is."""
    return SENTINEL.sub(lambda m: originals[int(m.group(1))]
                        if int(m.group(1)) < len(originals) else m.group(0), text)
