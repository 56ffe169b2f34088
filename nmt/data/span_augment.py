"""Span augmentation: an ordinary training pair rewritten so that what both sides share (a
number, a name, the same word) becomes a placeholder or a tag on both sides, so a model trained
mostly on prose learns to copy placeholders and tags, and to reorder numbered ones.

``Tom has 3 cats.`` / ``Tom a 3 chats.`` may become ``%1$s has %2$d cats.`` /
``%1$s a %2$d chats.``, ``{name} has {count} cats.`` / ``{name} a {count} chats.`` or
``<b>Tom</b> has 3 cats.`` / ``<b>Tom</b> a 3 chats.``. Where the shared units come in another
order on the target side, the placeholders are numbered or named (never a bare ``%s``, whose
order is the arguments').

The rule in one place (:func:`augment_spans`): a pair whose sides already hold a span is left
alone, and a rewritten pair is kept only when the span registry finds on each side exactly the
spans put in, so augmentation never makes a span the registry would not find.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from nmt.data.languages import letter_runs
from nmt.data.spans import SpanRules, parse

DEFAULT_RULES = SpanRules(parse("default"))
UNITS_DRAWN = (1, 1, 2, 2, 3)  # how many shared units a pair rewrites, drawn from these (capped
# by what the pair shares)
TRIES = 3  # styles drawn before a pair is left as it is

# a number (3, 3.5, 10:30, 1,000); the other tokens are runs of letters of one script
NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")


# --- the inventory -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mark:
    """What one shared unit becomes, the same on both sides: ``before``, the unit itself when
    ``keeps`` (a tag pair around it), then ``after``."""

    before: str
    after: str = ""
    keeps: bool = False

    def apply(self, unit: str) -> str:
        return self.before + (unit if self.keeps else "") + self.after

    def spans(self) -> list[str]:
        return [s for s in (self.before, self.after) if s]


@dataclass(frozen=True)
class Unit:
    """A text both sides hold once, as whole tokens: where it is on each side."""

    text: str
    src: tuple[int, int]
    tgt: tuple[int, int]

    @property
    def number(self) -> bool:
        return self.text[0].isdigit()


# style: (units in the source's order, whether the target keeps that order, rng) -> a mark each
Style = Callable[[Sequence[Unit], bool, random.Random], list[Mark]]

NAMES = ("name", "count", "file", "user", "path", "title", "n", "value")
VARIABLES = ("$HOME", "$USER", "$NAME", "$FILE", "${COUNT}", "${PATH}", "$1")
OPTIONS = ("--force", "--output", "--verbose", "--name", "--all", "--help", "-n", "-f")
TAG_PAIRS = (("<b>", "</b>"), ("<i>", "</i>"), ("<em>", "</em>"), ("<strong>", "</strong>"),
             ('<a href="#">', "</a>"), ('<span class="x">', "</span>"))
LONE_TAGS = ("<br/>", "<br>", '<img src="x.png"/>')


def _printf(units: Sequence[Unit], in_order: bool, rng: random.Random) -> list[Mark]:
    """``%s`` (``%d`` for a number) in order; numbered ``%1$s``, ``%2$d`` where the target
    reorders them, and in half the other pairs of several."""
    numbered = len(units) > 1 and (not in_order or rng.random() < 0.5)
    marks = []
    for i, unit in enumerate(units):
        conversion = "d" if unit.number else "s"
        marks.append(Mark(f"%{i + 1}${conversion}" if numbered else f"%{conversion}"))
    return marks


def _icu(units: Sequence[Unit], in_order: bool, rng: random.Random) -> list[Mark]:
    return [Mark(f"{{{i}}}") for i in range(len(units))]


def _python(units: Sequence[Unit], in_order: bool, rng: random.Random) -> list[Mark]:
    return [Mark(f"{{{name}}}") for name in rng.sample(NAMES, len(units))]


def _shell(units: Sequence[Unit], in_order: bool, rng: random.Random) -> list[Mark]:
    return [Mark(v) for v in rng.sample(VARIABLES, len(units))]


def _options(units: Sequence[Unit], in_order: bool, rng: random.Random) -> list[Mark]:
    return [Mark(o) for o in rng.sample(OPTIONS, len(units))]


def _tags(units: Sequence[Unit], in_order: bool, rng: random.Random) -> list[Mark]:
    """A tag pair around each unit (different pairs), or a lone tag in place of one unit."""
    if len(units) == 1 and rng.random() < 0.25:
        return [Mark(rng.choice(LONE_TAGS))]
    return [Mark(a, b, keeps=True) for a, b in rng.sample(TAG_PAIRS, len(units))]


# the registry's kind of each style's spans: a style is used only where the run keeps its kind
STYLES: dict[str, Style] = {
    "printf": _printf, "icu": _icu, "python": _python, "shell": _shell, "options": _options,
    "tags": _tags,
}


# --- finding what both sides share -----------------------------------------------------------


def _glued(text: str, start: int, end: int) -> bool:
    """Whether a token touches a digit or a cased letter (``MP3``, ``3D``): part of a word,
    not a unit of its own. A letter of a script without case (Chinese) does not glue."""
    around = text[start - 1:start] + text[end:end + 1]
    return any(c.isdigit() or c.lower() != c.upper() for c in around)


def _tokens(text: str) -> dict[str, list[tuple[int, int]]]:
    """Numbers and words (runs of letters of one script: ``PAM`` in ``のPAM認証``), and where."""
    out: dict[str, list[tuple[int, int]]] = {}
    for start, end in sorted([m.span() for m in NUMBER.finditer(text)] + letter_runs(text)):
        out.setdefault(text[start:end], []).append((start, end))
    return out


def _worth_copying(token: str) -> bool:
    """A number, or a word of two letters or more with a capital (a name, an acronym):
    ``Tom``, ``3``, ``Boston``, ``NASA``; not a lower-case word two languages happen to share
    (``in``, ``a``)."""
    return token[0].isdigit() or (len(token) > 1 and any(c.isupper() for c in token))


def shared_units(src: str, tgt: str) -> list[Unit]:
    """What both sides hold exactly once as whole tokens and is worth copying, in the source's
    order; neighbours that are neighbours on both sides too (``New York``, ``Tom Jackson``) are
    one unit."""
    src_tokens, tgt_tokens = _tokens(src), _tokens(tgt)
    units = []
    for token, [where] in ((t, w) for t, w in src_tokens.items() if len(w) == 1):
        there = tgt_tokens.get(token, [])
        if (len(there) == 1 and _worth_copying(token) and not _glued(src, *where)
                and not _glued(tgt, *there[0])):
            units.append(Unit(token, where, there[0]))
    units.sort(key=lambda u: u.src)
    merged: list[Unit] = []
    for unit in units:
        last = merged[-1] if merged else None
        if (last and src[last.src[1]:unit.src[0]] == " " == tgt[last.tgt[1]:unit.tgt[0]]):
            merged[-1] = Unit(f"{last.text} {unit.text}", (last.src[0], unit.src[1]),
                              (last.tgt[0], unit.tgt[1]))
        else:
            merged.append(unit)
    return merged


# --- the rewrite ---------------------------------------------------------------------------------


def _rewrite(text: str, places: Sequence[tuple[tuple[int, int], Mark]]) -> str:
    out, last = [], 0
    for (start, end), mark in sorted(places, key=lambda p: p[0]):
        out += [text[last:start], mark.apply(text[start:end])]
        last = end
    return "".join(out + [text[last:]])


def _expected(places: Sequence[tuple[tuple[int, int], Mark]]) -> list[str]:
    return [s for _, mark in sorted(places, key=lambda p: p[0]) for s in mark.spans()]


def augment_spans(src: str, tgt: str, rng: random.Random, *,
                  rules: SpanRules = DEFAULT_RULES) -> tuple[str, str] | None:
    """``src`` and ``tgt`` with one to three of their shared units (:data:`UNITS_DRAWN`) (numbers,
    names, the same word: :func:`shared_units`) made placeholders or wrapped in tags, the same
    on both sides, of one style drawn from :data:`STYLES` among the kinds of ``rules`` (a run's
    ``data.spans``). None where the pair shares nothing worth copying, where either side
    already holds a span of ``rules``, or where no drawn style gives spans that ``rules`` finds
    exactly (the caller keeps the pair as it is). Deterministic given ``rng``'s state."""
    styles = [name for name in STYLES if name in rules.kinds]
    if not styles or rules.find(src) or rules.find(tgt):
        return None
    units = shared_units(src, tgt)
    if not units:
        return None
    k = min(rng.choice(UNITS_DRAWN), len(units))
    chosen = sorted(rng.sample(units, k), key=lambda u: u.src)
    in_order = sorted(chosen, key=lambda u: u.tgt) == chosen
    for _ in range(TRIES):
        marks = STYLES[rng.choice(styles)](chosen, in_order, rng)
        src_places = [(u.src, m) for u, m in zip(chosen, marks, strict=True)]
        tgt_places = [(u.tgt, m) for u, m in zip(chosen, marks, strict=True)]
        new_src, new_tgt = _rewrite(src, src_places), _rewrite(tgt, tgt_places)
        if ([s.text for s in rules.find(new_src)] == _expected(src_places)
                and [s.text for s in rules.find(new_tgt)] == _expected(tgt_places)):
            return new_src, new_tgt
    return None


def augment_pair(src: str, tgt: str, index: int, share: float, seed: int, *,
                 rules: SpanRules = DEFAULT_RULES) -> tuple[str, str] | None:
    """Training pair ``index`` rewritten by :func:`augment_spans` if it is among the ``share``
    (``data.span_augment``) drawn under ``seed`` (``data.split_seed``), else None. Each pair
    draws from a source of its own, so a pair is rewritten the same way however the pairs
    are read, in chunks or in another process."""
    if share <= 0:
        return None
    rng = random.Random(f"span_augment:{seed}:{index}")
    if rng.random() >= share:
        return None
    return augment_spans(src, tgt, rng, rules=rules)
