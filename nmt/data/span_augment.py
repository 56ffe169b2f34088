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

from nmt.data.spans import SpanRules, parse

DEFAULT_RULES = SpanRules(parse("default"))
UNITS_DRAWN = (1, 1, 2, 2, 3)  # how many shared units a pair rewrites, drawn from these (capped
# by what the pair shares)
TRIES = 3  # styles drawn before a pair is left as it is

# a number (3, 3.5, 10:30, 1,000) or a run of letters, of any script
TOKEN = re.compile(r"\d+(?:[.,:]\d+)*|[^\W\d_]+")


# --- the inventory -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mark:
    """What one shared unit becomes, the same on both sides: ``before``, the unit itself when
    ``keeps`` (a tag pair around it), then ``after``. ``parts``: the spans ``before`` holds
    where it holds several (``%s.%s``)."""

    before: str
    after: str = ""
    keeps: bool = False
    parts: tuple[str, ...] = ()

    def apply(self, unit: str) -> str:
        return self.before + (unit if self.keeps else "") + self.after

    def spans(self) -> list[str]:
        return [*(self.parts or [self.before] if self.before else []),
                *([self.after] if self.after else [])]


@dataclass(frozen=True)
class Unit:
    """A text both sides hold once, as whole tokens: where it is on each side."""

    text: str
    src: tuple[int, int]
    tgt: tuple[int, int]

    @property
    def number(self) -> bool:
        return self.text[0].isdigit()


@dataclass(frozen=True)
class Draw:
    """What a style draws its marks for: the shared units in the source's order, whether the
    target keeps that order, the pair's random source, and the source's own lower-case words
    (option names are made of them too)."""

    units: Sequence[Unit]
    in_order: bool
    rng: random.Random
    words: Sequence[str]


Style = Callable[[Draw], list[Mark]]  # a mark for each unit

NAMES = ("name", "count", "file", "user", "path", "title", "n", "value")
VARIABLES = ("$HOME", "$USER", "$NAME", "$FILE", "${COUNT}", "${PATH}", "$1")
# printf conversions drawn, the plain ones most often: the others are cut into the pieces of
# their characters (data.span_pieces has only the frequent ones), and a model that saw only
# %s and %d drops or garbles a %08x or a %.*s
NUMBER_CONVERSIONS = ("d", "d", "d", "d", "i", "u", "ld", "lu", "zu", "lld", "x", "08x", "#lx",
                      "5d", "02d", ".2f")
TEXT_CONVERSIONS = ("s", "s", "s", "s", "s", "-20s", "10s", ".*s")
# a unit now and then becomes the same conversion two or three times (%s%s, %s.%s.%s, %d.%d),
# as in "%s%s%s" or a schema's "%s.%s": a model that saw them seldom drops one of the copies
REPEATED = 0.15
REPEAT_SEPARATORS = ("", "", ".", ": ", "/", " ")
# option names are made of these and of the source's words, so that a model learns to copy an
# option it never saw letter for letter (--keep-exported), not to recall a few it did
OPTION_WORDS = (
    "all", "output", "force", "verbose", "quiet", "name", "file", "dry", "run", "color", "keep",
    "list", "size", "format", "recursive", "user", "group", "mode", "level", "depth", "print",
    "show", "ignore", "case", "max", "min", "count", "config", "path", "dir", "sort", "reverse",
    "time", "date", "debug", "log", "version", "update", "check", "strict", "skip", "include",
    "exclude", "merge", "local", "remote", "branch", "tags", "signed", "cache", "line", "width",
    "limit", "interactive", "preserve", "target", "source", "export", "sections", "files",
    "from", "null", "data", "only", "full", "summary", "stat", "refs", "pack", "root", "help")
# a source's words an option name may be made of: lower-case ASCII, three letters or more
OPTION_WORD = re.compile(r"(?<![\w-])[a-z]{3,}(?![\w-])")
OPTION_VALUES = ("auto", "always", "never", "yes", "none", "all", "full", "short", "json", "0")
LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
TAG_PAIRS = (("<b>", "</b>"), ("<i>", "</i>"), ("<em>", "</em>"), ("<strong>", "</strong>"),
             ('<a href="#">', "</a>"), ('<span class="x">', "</span>"))
LONE_TAGS = ("<br/>", "<br>", '<img src="x.png"/>')


def _printf(draw: Draw) -> list[Mark]:
    """A conversion for each unit, of a number's kinds for a number (``%d``, ``%lu``,
    ``%08x``...) and of a string's for a name (``%s``, ``%-20s``...), in order; numbered
    (``%1$s``, ``%2$lu``) where the target reorders them, and in half the other pairs of
    several. Unnumbered, a unit becomes the same conversion two or three times in a share
    :data:`REPEATED` (``%s%s``, ``%d.%d.%d``)."""
    units, rng = draw.units, draw.rng
    numbered = len(units) > 1 and (not draw.in_order or rng.random() < 0.5)
    marks = []
    for i, unit in enumerate(units):
        conversion = rng.choice(NUMBER_CONVERSIONS if unit.number else TEXT_CONVERSIONS)
        if numbered:  # a numbered argument takes no * (the width would be an argument too)
            marks.append(Mark(f"%{i + 1}${conversion.replace('.*', '')}"))
        elif rng.random() < REPEATED:
            parts = (f"%{conversion}",) * rng.choice((2, 2, 3))
            marks.append(Mark(rng.choice(REPEAT_SEPARATORS).join(parts), parts=parts))
        else:
            marks.append(Mark(f"%{conversion}"))
    return marks


def _icu(draw: Draw) -> list[Mark]:
    return [Mark(f"{{{i}}}") for i in range(len(draw.units))]


def _python(draw: Draw) -> list[Mark]:
    return [Mark(f"{{{name}}}") for name in draw.rng.sample(NAMES, len(draw.units))]


def _shell(draw: Draw) -> list[Mark]:
    return [Mark(v) for v in draw.rng.sample(VARIABLES, len(draw.units))]


def option(rng: random.Random, words: Sequence[str] = ()) -> str:
    """A command-line option as software strings write them: ``--keep-going``, ``--no-color``,
    ``--color=auto``, ``-x``, ``-rf``; long names of one to three words, each drawn from
    :data:`OPTION_WORDS` or, half the time where it has some, from ``words``."""

    def word() -> str:
        return rng.choice(words if words and rng.random() < 0.5 else OPTION_WORDS)

    form = rng.random()
    if form < 0.5:
        return "--" + "-".join(word() for _ in range(rng.choice((1, 1, 2, 2, 3))))
    if form < 0.6:
        return f"--no-{word()}"
    if form < 0.7:
        return f"--{word()}={rng.choice(OPTION_VALUES)}"
    if form < 0.9:
        return "-" + rng.choice(LETTERS)
    return "-" + "".join(rng.sample(LETTERS[:26], rng.choice((2, 3))))


def _options(draw: Draw) -> list[Mark]:
    """A different option for each unit (:func:`option`)."""
    chosen: list[str] = []
    while len(chosen) < len(draw.units):
        made = option(draw.rng, draw.words)
        if made not in chosen:
            chosen.append(made)
    return [Mark(o) for o in chosen]


def _tags(draw: Draw) -> list[Mark]:
    """A tag pair around each unit (different pairs), or a lone tag in place of one unit."""
    if len(draw.units) == 1 and draw.rng.random() < 0.25:
        return [Mark(draw.rng.choice(LONE_TAGS))]
    return [Mark(a, b, keeps=True) for a, b in draw.rng.sample(TAG_PAIRS, len(draw.units))]


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
    out: dict[str, list[tuple[int, int]]] = {}
    for m in TOKEN.finditer(text):
        out.setdefault(m.group(), []).append(m.span())
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
        draw = Draw(chosen, in_order, rng, OPTION_WORD.findall(src))
        marks = STYLES[rng.choice(styles)](draw)
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
