"""Cleaning filters: which training pairs are noise, one small function each.

A filter reads one normalised pair, the two languages and its parameter, and says whether to
remove the pair. ``data.filters`` chooses them (docs/DATA.md, "Cleaning and mixing"):

- ``"default"``: every filter below at its default parameter; ``"none"``: no filter;
- a list: ``"NAME"`` adds a filter at its default, ``"NAME=VALUE"`` with that parameter,
  ``"-NAME"`` takes one away, after ``"default"`` when the list starts with it
  (``["default", "ratio=2.5", "-digits"]``).

The defaults keep 99% of the built-in Tatoeba corpus (docs/DATA.md). Filters apply to the pairs
of the corpus before the split, never to the user's own ``data.valid`` / ``data.test`` files;
every pair removed is written to ``rejected.tsv`` in the cache (the filter, the source, the
target) and counted per filter.

Filters judge the text around the protected spans of ``data.spans`` (:mod:`nmt.data.spans`):
each reads the pair with its spans masked by plain words (:func:`masked`), so that a pair is
never removed only because of its placeholders, options, paths or tags. ``identical`` (the text
as written is the same) and ``url`` (which is about addresses) read it as written.

Adding a filter is one function and one line in :data:`FILTERS`. Plain Python, no config: the
config checks ``data.filters`` with :func:`parse`.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from nmt.data.languages import Language, letter_runs
from nmt.data.spans import Finder, SpanRules, emails, paths, urls
from nmt.data.spans import parse as parse_spans
from nmt.errors import shown


def identical(src: str, tgt: str, sl: Language, tl: Language, _: float) -> bool:
    """The two sides are the same text, up to case and spacing (nothing was translated)."""
    return "".join(src.split()).casefold() == "".join(tgt.split()).casefold()


def chars(src: str, tgt: str, sl: Language, tl: Language, limit: float) -> bool:
    """A side longer than ``limit`` characters (a paragraph, a table, a file pasted in)."""
    return max(len(src), len(tgt)) > limit


RATIO_FLOOR = 8  # pairs whose longer side has at most this many words are never ratio outliers


def ratio(src: str, tgt: str, sl: Language, tl: Language, limit: float) -> bool:
    """One side more than ``limit`` times as long as the other, in words (a script written
    without spaces counts its characters as words of the same length: :meth:`Language.words`);
    short pairs ("Go." / "Va-t'en !") are left alone."""
    a, b = sl.words(src), tl.words(tgt)
    return max(a, b) > RATIO_FLOOR and max(a, b) > limit * max(min(a, b), 1)


_DIGIT = re.compile(r"\d")
_SEPARATED_DIGITS = re.compile(r"(?<=\d)[ ,.'\u00a0\u202f](?=\d{3}\b)")


def _numbers(text: str) -> list[str]:
    ascii_digits = "".join(str(unicodedata.decimal(c)) if c.isdecimal() else c for c in text)
    return sorted(re.findall(r"\d+", _SEPARATED_DIGITS.sub("", ascii_digits)))


SPELLED_OUT = 10  # a number up to this that only one side has may be written out on the other


def digits(src: str, tgt: str, sl: Language, tl: Language, _: float) -> bool:
    """The numbers differ ("10 000" and "10,000" are one number; any script's digits count).
    Numbers from 0 to :data:`SPELLED_OUT` that only one side has pass, where the other side has
    no number of its own: translations write them out or in digits as their language does
    (``one column`` -> ``1つの列``, ``3rd level`` -> ``第三层``, ``greater than zero`` -> ``больше
    0``, ``October`` -> ``10月``); ``2 cats`` -> ``3 chats`` does not."""
    if not (_DIGIT.search(src) or _DIGIT.search(tgt)):
        return False
    a, b = Counter(_numbers(src)), Counter(_numbers(tgt))
    only_src, only_tgt = a - b, b - a
    if only_src and only_tgt:
        return True
    return any(int(n) > SPELLED_OUT for n in only_src + only_tgt)


def repeated_chars(src: str, tgt: str, sl: Language, tl: Language, limit: float) -> bool:
    """A character other than a space written ``limit`` times or more in a row on one side
    and not on the other (``Nooooooooooo!`` / ``Non !``). A run on both sides is the string's
    own: an underline as long as its title (``Upgrade Complete ----------------`` / ``Mise à
    jour terminée --------------------``), a template (``tmp.XXXXXXXXXX``), a file name of
    zeros."""
    n = max(int(limit), 2)

    def runs(side: str) -> set[str]:
        return {m[1] for m in re.finditer(rf"(\S)\1{{{n - 1},}}", side)}

    return runs(src) != runs(tgt)


def repeated_words(src: str, tgt: str, sl: Language, tl: Language, limit: float) -> bool:
    """The same word ``limit`` times or more in a row ("no no no no no", "No, no, no...")."""
    n = max(int(limit), 2)
    return re.search(rf"\b(\w+)(?:\W+\1\b){{{n - 1},}}", f"{src}\n{tgt}".casefold()) is not None


_NOT_WORD = re.compile(r"[^\w\s]")
_QUOTES = frozenset("\"'`«»‹›“”„‘’‚「」『』")  # one kind of symbol: a translation changes the style


def _symbols(side: str) -> Counter[str]:
    """A side's symbols (neither letters, marks, digits nor spaces), each quotation mark
    counted as one kind."""
    return Counter("\"" if c in _QUOTES else c for c in _NOT_WORD.findall(side)
                   if unicodedata.category(c)[0] != "M")


def nonalnum(src: str, tgt: str, sl: Language, tl: Language, limit: float) -> bool:
    """More than ``limit`` of a side's characters (spaces aside) are neither letters, marks nor
    digits, and the other side does not carry at least half of the same symbols: markup,
    emoticons, lines of symbols. Symbols a translation carries over are the string's
    structure (``[Y/n]`` -> ``[O/n]``, ``[FILE...]`` -> ``[FICHIER...]``, ``--- No Tip ---``),
    not noise."""
    counts = (_symbols(src), _symbols(tgt))
    totals = [c.total() for c in counts]
    if not any(n > limit * (len(side) - side.count(" ") - side.count("\u202f"))
               for n, side in zip(totals, (src, tgt), strict=True)):
        return False
    return (counts[0] & counts[1]).total() < 0.5 * max(totals)


# opening and closing marks that must pair up on a side (’ is left out: it is an apostrophe too)
_PAIRS = (("(", ")"), ("[", "]"), ("{", "}"), ("「", "」"), ("『", "』"), ("（", "）"))
_MARKS = re.compile("[" + re.escape("".join(o + c for o, c in _PAIRS) + '"“”„«»') + "]")
_PAIRED = (0,) * (len(_PAIRS) + 2)  # what _unpaired says of a side whose marks pair up


def _unpaired(side: str) -> tuple[int, ...]:
    """How a side's brackets and quotes fail to pair up: opened less closed for each kind of
    bracket, the parity of straight double quotes, opening less closing quotation marks
    (English “…”, German „…“, French «…» and German »…« alike: a translation changes the
    style). :data:`_PAIRED` where they pair up."""
    if not _MARKS.search(side):
        return _PAIRED
    opened, closed = ("„", "“") if "„" in side else ("“", "”")  # „…“ closes with English's opening
    quotes = side.count(opened) + side.count("«") - side.count(closed) - side.count("»")
    return (*(side.count(o) - side.count(c) for o, c in _PAIRS), side.count('"') % 2, quotes)


def brackets(src: str, tgt: str, sl: Language, tl: Language, _: float) -> bool:
    """A side whose brackets or quotes do not pair up (more opened than closed or the other
    way, an odd number of straight double quotes: a sentence cut in two, a quoted field),
    unless the other side is unpaired alike: software strings name a bracket
    (`` `)' expected`` -> ``« ) » attendue``) or are cut where the program goes on."""
    return _unpaired(src) != _unpaired(tgt)


_ADDRESSES: tuple[Finder, ...] = (urls.find, emails.find)  # what the spans call addresses
_STRIP = " .,;:!?()[]<>\"'"


def _addresses(text: str) -> list[str]:
    return [text[a:b] for find in _ADDRESSES for a, b in find(text)]


def url(src: str, tgt: str, sl: Language, tl: Language, _: float) -> bool:
    """A side that is only a web or e-mail address or a file path (punctuation around it
    aside), or a web or e-mail address on one side that the other lacks. What an address or a
    path is, the protected spans say (:mod:`nmt.data.spans`): ``Install/Remove``, ``n/a`` and
    ``input/output`` are words, not paths. It reads the pair as written, spans unmasked."""
    for side in (src, tgt):
        bare = side.strip(_STRIP)
        if bare and any((a, b) == (0, len(bare)) for find in (*_ADDRESSES, paths.find)
                        for a, b in find(bare)):
            return True
    return len(_addresses(src)) != len(_addresses(tgt))


def _letter_runs(side: str) -> list[str]:
    """A side's words, cut wherever the script changes (``型がINVALID``: ``型が``, ``INVALID``;
    the masks' fullwidth letters are in none)."""
    return [side[start:end] for start, end in letter_runs(side)]


def _share_written(letters: str, lang: Language) -> float:
    return sum(map(lang.writes, letters)) / len(letters)


def script(src: str, tgt: str, sl: Language, tl: Language, limit: float) -> bool:
    """Less than ``limit`` of a side's letters are in its language's script (English in the
    Russian file, Latin transliteration in a Greek one), not counting the words the other side
    has too: names and identifiers a translation carries over (``Adobe FrameMaker`` ->
    ``Шрифт Adobe FrameMaker``, ``SVG image`` -> ``SVG 画像``) are no sign of a side in the
    wrong language. A side of nothing but such words is judged on all its letters."""
    for side, other, lang in ((src, tgt, sl), (tgt, src, tl)):
        if lang.script == "Latin" and side.isascii():
            continue
        mine = _letter_runs(side)
        if not mine or _share_written("".join(mine), lang) >= limit:
            continue
        carried = {run.casefold() for run in _letter_runs(other)}
        own = "".join(run for run in mine if run.casefold() not in carried)
        if not own or _share_written(own, lang) < limit:
            return True
    return False


@dataclass(frozen=True)
class Kind:
    """What a filter's parameter is, and the values that mean something: a share of a side lies
    in (0, 1] (or below 1, when the filter removes what exceeds it: more than all is nothing),
    a ratio of lengths is at least 1 (every side is once as long as itself), a count of
    repetitions or characters is a whole number of at least 2 (one is every character)."""

    name: str  # "a share", "a ratio", "a count"; "" for a filter that takes no value
    low: float
    high: float
    high_included: bool = True
    whole: bool = False

    def expected(self) -> str:
        """The range in words, for a message."""
        if self.whole:
            return f"{self.name}, a whole number from {self.low:,.0f} to {self.high:,.0f}"
        if self.high == float("inf"):
            return f"{self.name} >= {self.low:g}"
        return f"{self.name}, {self.low:g} < N {'<=' if self.high_included else '<'} {self.high:g}"

    def admits(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        if self.whole:
            return value == int(value) and self.low <= value <= self.high
        if self.high == float("inf"):
            return self.low <= value < self.high
        return self.low < value and (value <= self.high if self.high_included
                                     else value < self.high)


NO_VALUE = Kind("", 1, 1)
SHARE = Kind("a share", 0, 1)
SHARE_EXCEEDED = Kind("a share", 0, 1, high_included=False)
RATIO = Kind("a ratio", 1, float("inf"))
COUNT = Kind("a count", 2, 2**31 - 1, whole=True)


@dataclass(frozen=True)
class Filter:
    check: Callable[[str, str, Language, Language, float], bool]  # True: remove the pair
    default: float  # the parameter when none is given (1 for filters without one)
    what: str  # what it removes, for docs and --help
    kind: Kind = NO_VALUE  # what its parameter is
    as_written: bool = False  # reads the pair with its spans, not with them masked


# name -> filter, in the order they are tried (a pair is counted under the first that removes it)
FILTERS: dict[str, Filter] = {
    "identical": Filter(identical, 1, "the same text on both sides", as_written=True),
    "chars": Filter(chars, 1000, "a side over N characters", COUNT),
    "ratio": Filter(ratio, 3.0, "a side over N times as long as the other (pairs over "
                                f"{RATIO_FLOOR} words)", RATIO),
    "digits": Filter(digits, 1, "numbers that differ between the sides"),
    "repeated_chars": Filter(repeated_chars, 10, "a character N times in a row on one side only",
                             COUNT),
    "repeated_words": Filter(repeated_words, 5, "a word N times in a row", COUNT),
    "nonalnum": Filter(nonalnum, 0.5, "over a share N of a side neither letters nor digits, "
                       "symbols the other side does not carry", SHARE_EXCEEDED),
    "brackets": Filter(brackets, 1, "brackets or quotes that do not pair up on a side, unless "
                                    "the other is unpaired alike"),
    "url": Filter(url, 1, "a side that is only a web or e-mail address or a file path, or an "
                          "address on one side only", as_written=True),
    "script": Filter(script, 0.5, "under a share N of a side's letters in its script", SHARE),
}


def parse(spec: str) -> dict[str, float]:
    """``data.filters`` (a comma list, see the module docstring) -> filter name -> parameter,
    in :data:`FILTERS`' order. A ValueError says what is wrong: a parameter outside its
    filter's :class:`Kind` is refused, naming the range."""
    items = [item.strip() for item in spec.split(",")]
    chosen: dict[str, float] = {}
    for i, item in enumerate(items):
        if item in ("default", "none"):
            if i:
                raise ValueError(f"{item!r} may only come first")
            if item == "default":
                chosen = {name: f.default for name, f in FILTERS.items()}
            continue
        name, _, value = item.lstrip("-").partition("=")
        if name not in FILTERS:
            raise ValueError(f"unknown filter {shown(name, 40)}; expected default, none, or names "
                             f"among {', '.join(FILTERS)}")
        if item.startswith("-"):
            if value:
                raise ValueError(f"{shown(item, 40)}: a filter taken away takes no value")
            chosen.pop(name, None)
            continue
        kind = FILTERS[name].kind
        if value and kind is NO_VALUE:
            raise ValueError(f"{shown(item, 40)}: {name} takes no value (write {name})")
        try:
            parameter = float(value) if value else FILTERS[name].default
        except ValueError:
            raise ValueError(f"{shown(item, 40)}: expected {name}=N, N {kind.expected()}") from None
        if value and not kind.admits(parameter):
            raise ValueError(f"{shown(item, 40)}: expected {name}=N, N {kind.expected()}")
        chosen[name] = parameter
    return {name: chosen[name] for name in FILTERS if name in chosen}


def judged_spans(spec: str) -> SpanRules:
    """The spans the filters judge the text around: those of ``data.spans`` (``spec``), but
    terms, which are words like the others."""
    return SpanRules(tuple(k for k in parse_spans(spec, have_terms=True) if k != "terms"))


# a word of letters that stands for the n-th span of a side while the filters read it: letters,
# so no filter counts it as a symbol or a number; a different word for each span, so that
# "%s %s %s %s %s" is not a word repeated; fullwidth, so it belongs to no script
_MASK_LETTERS = "ＡＢＣＤＥＦＧＨＩＪＫＬＭＮＯＰＱＲＳＴＵＶＷＸＹＺ"


def _mask_word(n: int) -> str:
    word = ""
    while True:
        n, r = divmod(n, len(_MASK_LETTERS))
        word = _MASK_LETTERS[r] + word
        if not n:
            return "Ｘ" + word
        n -= 1


def masked(text: str, spans: SpanRules) -> str:
    """``text`` with each of its spans replaced by a word that no filter objects to: what the
    filters read, so that a pair is never removed only because of its placeholders, options,
    paths or tags (``%1$s`` reordered, a quoted ``%s``, ``%s%s%s%s``)."""
    out, last = [], 0
    for n, span in enumerate(spans.find(text)):
        out += [text[last:span.start], _mask_word(n)]
        last = span.end
    out.append(text[last:])
    return "".join(out)


def first_failed(src: str, tgt: str, sl: Language, tl: Language,
                 chosen: dict[str, float], spans: SpanRules | None = None) -> str | None:
    """The name of the first chosen filter that removes the pair, or None to keep it. With
    ``spans`` (:func:`judged_spans`), each filter reads the pair with them masked
    (:func:`masked`), but those that read it as written."""
    around = (src, tgt) if spans is None or not spans.kinds else (
        masked(src, spans), masked(tgt, spans))
    for name, parameter in chosen.items():
        f = FILTERS[name]
        s, t = (src, tgt) if f.as_written else around
        if f.check(s, t, sl, tl, parameter):
            return name
    return None
