"""Protected spans through translation: every output keeps its source's spans, whatever
engine translated it.

:func:`guarded` wraps any engine (a function from sentences to translations) and checks each
output's spans (:mod:`nmt.data.spans`) against those of its source. A span the output lost or
garbled is restored, an invented one (a span the source does not have) is removed, and tags the
output has out of order (``</b> ici <b>``, ``<b><i></b></i>``: not nested as the source's,
:func:`nmt.data.spans.misplaced_tags`) are taken out and put again as lost ones. The places,
in the order they are tried:

1. **in place**: an invented span of the kind of a lost one takes its place (``%i`` for
   ``%d``, ``{nom}`` for ``{name}``); a garbled copy of a lost span is replaced by it, where
   its characters are spaced apart or are the tokenizer's unknown mark (``% s``,
   ``{ name }``, ``⁇ s``, ``< b >``);
2. **unknown marks**: SentencePiece writes ``⁇`` for a character it could not encode (a word
   tokenizer ``<unk>``); the marks left take the lost spans in order;
3. **beside a kept span, then by position** (guesses): a span still lost that the source glues
   to a span the output kept goes beside it as in the source (``<b>%s</b>``, only ``%s``
   kept); the others go between the output's words (spans aside) at the share of the source's
   words before them (after the last word: at the end, before the closing punctuation when the
   source has it there), after the kept spans the source has before them there and before
   those it has after them; spans bound for one place go together in the source's order,
   joined to each other and their neighbours as in the source: a lost ``<b>`` and ``</b>``
   never come back as ``</b> <b>``, and lost tags go in the source's order; a lost tag pair
   around words goes around a word at least (``<code>parler</code>``, not ``<code> </code>``)
   where the output has one there.

**Markup** (``markup``): with ``place`` (the default), the engine translates each source
without its tags (:func:`without_tags`) and the tags are placed in its output by 3, after the
other spans are checked: a model that has not learnt markup translates the words as it would
without it (1,000 held-out sentences with tags put in, the demo-sized model: 34.2 BLEU against
4.4 when it sees the tags; docs/BENCHMARKS.md, "Markup"), at the price of a place guessed by
position. ``model`` gives the engine the tags, for a model trained on markup.

``repair`` (the default) does all three and counts what it did; ``strict`` does 1 and 2 and
refuses a line that needs a guess (:class:`UnplacedSpan`, naming the spans); ``off`` leaves
outputs as the engine wrote them (from sources with their tags). The result is checked: a line
that still does not hold exactly its source's spans, its tags nested as the source's (a span
put beside a word that makes another of them, spaced apart and still not) is refused in both
modes, never given back broken. A sentence of more than :data:`MAX_SPANS` spans, source or
output (a minified page or a data dump, not a sentence), is not repaired but refused the same
way, as the engine wrote it: placing each of its spans would cost the square of their number.

The engine's attention is not used: the CTranslate2 engine has none to give, and one rule for
every engine is the point. Masking spans with sentinels before encoding (``nmt.data.spans.mask``)
is not done either: no model trained today has seen a sentinel.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from nmt.arguments import option
from nmt.config import DataConfig
from nmt.data.spans import Span, SpanRules, holds_exactly, misplaced_tags, rules, tags
from nmt.errors import DataError

MODES = ("repair", "strict", "off")
MARKUP = ("place", "model")  # tags taken out before the engine and placed after it, or not
UNKNOWN_MARKS = ("⁇", "<unk>")  # SentencePiece's surface of an unknown piece; the word tokenizer's
_UNKNOWN = re.compile("|".join(re.escape(m) for m in UNKNOWN_MARKS))
_CLOSING = ".!?:;…。！？"
_WORD = re.compile(r"\S+")
MAX_SPANS = 100  # spans of a sentence the repair takes on (a sentence of prose has a few)
_ENCLOSING = ("»«", "«»", '""', "''", "„“", "“”", "‘’", "`'", "()", "[]", "「」")


def _shown(spans: Sequence[str]) -> str:
    return ", ".join(repr(s)[:60] for s in spans[:5]) + (
        f" and {len(spans) - 5:,} more" if len(spans) > 5 else "")


class UnplacedSpan(DataError):
    """A line whose lost spans, or tags out of order, have no known place (``--spans
    strict``)."""

    def __init__(self, index: int, spans: Sequence[str], strict: bool = True,
                 misordered: Sequence[str] = ()) -> None:
        self.index, self.spans, self.strict = index, list(spans), strict
        self.misordered = list(misordered)  # of the spans, the tags the output had out of order
        lost = list((Counter(spans) - Counter(misordered)).elements())
        flag = option("spans")
        hint = (f"{flag} strict; {flag} repair guesses one from its position in the source"
                if strict else f"{flag} off keeps the model's text")
        what = " and ".join(
            ([f"lost {_shown(lost)}"] if lost else [])
            + ([f"put {_shown(misordered)} out of order"] if misordered else []))
        self.reason = (f"the translation {what} and no place for "
                       f"{'it' if len(spans) == 1 else 'them'} is known ({hint})")
        super().__init__(f"line {index + 1}: {self.reason}")

    def at(self, first_line: int) -> UnplacedSpan:
        """The same error, counting lines from ``first_line`` (0: the first)."""
        return UnplacedSpan(self.index + first_line, self.spans, self.strict, self.misordered)


@dataclass(frozen=True)
class Repair:
    text: str
    spans: int = 0  # spans the source has
    restored: int = 0  # lost spans put back
    guessed: int = 0  # of which placed by position
    removed: int = 0  # invented spans taken out
    unplaced: tuple[str, ...] = ()  # lost spans with no place (only without guesses)
    misordered: tuple[str, ...] = ()  # of which tags the output had out of order


@dataclass
class SpanCounts:
    """What a guard did so far."""

    sentences: int = 0  # what the engine translated: a line, or each sentence and segment of one
    # that the layout cut apart (nmt.translation.layout)
    with_spans: int = 0  # lines whose source has spans
    repaired: int = 0  # lines changed
    restored: int = 0
    guessed: int = 0
    removed: int = 0
    unplaced: int = 0  # sentences whose spans not even a guess could all place (repair mode)

    def since(self, before: SpanCounts) -> SpanCounts:
        return SpanCounts(*(a - b for a, b in zip(self.as_tuple(), before.as_tuple(),
                                                  strict=True)))

    def as_tuple(self) -> tuple[int, ...]:
        return (self.sentences, self.with_spans, self.repaired, self.restored, self.guessed,
                self.removed, self.unplaced)

    def summary(self) -> str:
        """One line, for the warning ``nmt translate`` prints (empty when nothing changed)."""
        if not self.repaired and not self.unplaced:
            return ""
        guessed = f", {self.guessed} of them placed by position" if self.guessed else ""
        unplaced = (f"; in {self.unplaced} sentence{'s' if self.unplaced > 1 else ''} not every "
                    "span could be placed" if self.unplaced else "")
        return (f"spans repaired in {self.repaired} of {self.sentences} sentences: {self.restored} "
                f"restored{guessed}, {self.removed} invented removed{unplaced} "
                f"({option('spans')} strict refuses a line that needs a guess; "
                f"{option('spans')} off keeps the model's text)")


@dataclass
class SpanGuard:
    """The rules and modes of a translator, and what it did (:class:`SpanCounts`)."""

    rules: SpanRules
    mode: str = "repair"
    markup: str = "place"  # MARKUP
    counts: SpanCounts = field(default_factory=SpanCounts)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode: expected one of {', '.join(MODES)}, got {self.mode!r}")
        if self.markup not in MARKUP:
            raise ValueError(f"markup: expected one of {', '.join(MARKUP)}, got "
                             f"{self.markup!r}")


def without_tags(source: str, rules: SpanRules) -> str:
    """``source`` with its tags (:mod:`nmt.data.spans.tags`) taken out: a tag between two
    words leaves one space; one inside a word (``un<b>real</b>``) leaves none, unless it
    stands between words by nature (``one<br/>two``: :data:`~nmt.data.spans.tags.SEPARATE`)."""
    found = [s for s in rules.find(source) if s.kind == "tags"]
    if not found:
        return source
    text, end, separate = "", 0, False
    for s in [*found, None]:
        piece = source[end:s.start if s is not None else len(source)]
        if text.endswith(" ") and piece.startswith(" "):
            piece = piece[1:]
        elif separate and text[-1:].strip() and piece[:1].strip():
            piece = " " + piece
        if piece:
            text, separate = text + piece, False
        if s is not None:
            separate = separate or tags.name(s.text) in tags.SEPARATE
            end = s.end
    text = text if source[:1].isspace() else text.lstrip()
    return text if source[-1:].isspace() else text.rstrip()


def guarded(translate: Callable[[list[str]], list[str]], sources: Sequence[str],
            guard: SpanGuard | None) -> list[str]:
    """``translate(sources)``, each output checked against its source's spans by ``guard``
    (None, or mode ``off``: as translated). :class:`UnplacedSpan` for a line ``strict``
    cannot place, counted from 0 within ``sources``; ``repair`` keeps such a line as far as it
    could repair it and counts it (:attr:`SpanCounts.unplaced`), so one line never stops a
    whole file. With ``guard.markup`` ``place``, the engine translates each source without
    its tags (:func:`without_tags`), and the tags are placed in its output after the other
    spans are checked, by position (the third place of the module docstring); what the
    counts say is the check of the other spans. A line of more than :data:`MAX_SPANS` spans,
    which is not repaired, goes to the engine as written."""
    if guard is None or guard.mode == "off":
        return translate(list(sources))
    bare = [without_tags(s, guard.rules) if guard.markup == "place" else s for s in sources]
    bare = [b if len(guard.rules.find(s)) <= MAX_SPANS else s  # not repaired: as written
            for s, b in zip(sources, bare, strict=True)]
    outputs = translate(bare)
    fixed = []
    counts = guard.counts
    for i, (source, plain, output) in enumerate(zip(sources, bare, outputs, strict=True)):
        repair = repair_line(plain, output, guard.rules, guess=guard.mode == "repair")
        changed = repair.text != output
        if plain != source:  # the tags taken out, placed again (the line's final check)
            tagged = repair_line(source, repair.text, guard.rules)
            repair = replace(repair, text=tagged.text, spans=tagged.spans,
                             unplaced=repair.unplaced or tagged.unplaced,
                             misordered=repair.misordered or tagged.misordered)
        if repair.unplaced and guard.mode == "strict":
            raise UnplacedSpan(i, repair.unplaced, misordered=repair.misordered)
        counts.unplaced += bool(repair.unplaced)  # repair: kept as far as it got, and said
        counts.sentences += 1
        counts.with_spans += repair.spans > 0
        if changed:
            counts.repaired += 1
        counts.restored += repair.restored
        counts.guessed += repair.guessed
        counts.removed += repair.removed
        fixed.append(repair.text)
    return fixed


def _variant(text: str) -> re.Pattern[str]:
    """A garbled copy of the span ``text``: its characters, spaced apart, any mark written as
    the unknown mark, letters in either case; not running on into a word (``⁇ ba`` holds no
    copy of ``%b``: put back there, it would be no span)."""
    parts = []
    for c in text:
        if c.isspace():
            continue
        if c.isalnum():
            parts.append(re.escape(c))
        else:
            parts.append("(?:" + "|".join(re.escape(x) for x in (c, *UNKNOWN_MARKS)) + ")")
    tail = r"(?![^\W_])" if text[-1:].isalnum() else ""
    return re.compile(r"\s{0,3}".join(parts) + tail, re.IGNORECASE)


def _free(start: int, end: int, taken: list[tuple[int, int]]) -> bool:
    return all(end <= a or start >= b for a, b in taken)


def _apply(text: str, edits: list[tuple[int, int, str]]) -> str:
    """``text`` with ``(start, end, replacement)`` edits made; a removal takes the quotes or
    brackets it leaves empty and a space with it, so that no double space or space before
    punctuation is left."""
    for start, end, new in sorted(edits, reverse=True):
        if not new:
            if start and text[start - 1:start] + text[end:end + 1] in _ENCLOSING:
                start, end = start - 1, end + 1
            before, after = text[:start], text[end:]
            if before.endswith(" ") and (not after or after[0] in " " + _CLOSING + ",)]»”"):
                start -= 1
            elif not before.strip() and after.startswith(" "):
                end += 1
        text = text[:start] + new + text[end:]
    return text


def _prose_words(source: str, spans: Sequence[Span]) -> list[int]:
    """Where the words of ``source`` start, its ``spans`` aside."""
    blank = list(source)
    for s in spans:
        blank[s.start:s.end] = " " * (s.end - s.start)
    return [m.start() for m in _WORD.finditer("".join(blank))
            if any(c.isalnum() for c in m.group())]


def _prose_share(words: list[int], span: Span) -> tuple[float, bool]:
    """The share of the source's ``words`` (:func:`_prose_words`) before ``span``, and whether
    one comes after it."""
    before = bisect.bisect_left(words, span.start)
    return (before / len(words) if words else 0.0), before < len(words)


def _output_words(text: str, rules: SpanRules) -> list[re.Match[str]]:
    """The words of ``text``: runs of non-space (a span's own spaces, a tag's attributes, are
    none), those with a letter or digit outside its spans, as :func:`_prose_words` counts the
    source's, so that a share of the source's words is the same share of the output's. A span
    is put between them, never inside a run (``--force/x`` is not cut after ``--force``)."""
    joined, prose = list(text), list(text)
    for s in rules.find(text):
        joined[s.start:s.end] = [c if not c.isspace() else "_" for c in s.text]
        prose[s.start:s.end] = " " * (s.end - s.start)
    return [m for m in _WORD.finditer("".join(joined))
            if any(c.isalnum() for c in prose[m.start():m.end()])]


def _joined(source: str, run: Sequence[Span], spaced: bool) -> str:
    """The spans of ``run`` (in the source's order) as one text: joined where the source joins
    them (``<b>%s</b>``), else a space apart (and always, when ``spaced``)."""
    out = run[0].text
    for a, b in zip(run, run[1:], strict=False):
        out += ("" if source[a.end:b.start] == "" and not spaced else " ") + b.text
    return out


def _insert(text: str, source: str, run: Sequence[Span], k: int, words: list[re.Match[str]],
            kept: Sequence[tuple[Span, int]], spaced: bool = False) -> tuple[int, str]:
    """Where in ``text`` the spans of ``run`` (in the source's order, :func:`_joined`) go, and
    what goes there: before its word ``k`` of ``words`` (:func:`_output_words`), or after word
    ``k - 1`` where the source glues them to the word before; after the last word when ``k``
    is their number (before the closing punctuation when the source has it there). Never
    before a ``kept`` span (output span, its place in the source) between those words that
    the source has before them, nor after one it has after them. Joined to their neighbours
    as in the source (``spaced``: apart from them); nothing of ``text`` is replaced."""
    first, last = run[0], run[-1]
    spans = _joined(source, run, spaced)
    spaced_before = spaced or first.start == 0 or source[first.start - 1].isspace()
    spaced_after = spaced or last.end == len(source) or source[last.end].isspace()
    if not text.strip():
        return len(text), spans
    glued = k > 0 and not spaced_before and spaced_after

    def after_word() -> tuple[int, str]:
        at = words[k - 1].end()
        return at, spans + (" " if text[at:at + 1] and not text[at].isspace() else "")

    if k >= len(words) and not (glued and words):
        body = text.rstrip()
        if source[last.end:].strip()[:1] in tuple(_CLOSING):
            body = body.rstrip(_CLOSING).rstrip()
        at, place = len(body), (" " if spaced_before or not body else "") + spans
    elif glued:  # to the word before (``word</b>``), the last word too (``faim</b> !``)
        at, place = after_word()
    else:  # before the word (``<b>word``), apart from the one before
        at = words[k].start()
        place = (" " if at and not text[at - 1].isspace() else "") + spans + (
            " " if spaced_after else "")
    low = words[k - 1].end() if 0 < k <= len(words) else 0
    high = words[k].start() if k < len(words) else len(text)
    around = [(s, i) for s, i in kept if low <= s.start and s.end <= high]
    earlier = [(s.end, i + len(s.text)) for s, i in around if i < first.start]
    later = [(s.start, i) for s, i in around if i > last.start]
    if earlier and at < max(earlier)[0]:  # after the kept spans the source has before them,
        at, end = max(earlier)  # joined to the last as the source joins them
        after = " " if spaced_after and text[at:at + 1] and not text[at].isspace() else ""
        place = ("" if end == first.start and not spaced else " ") + spans + after
    elif later and at > min(later)[0]:  # before those it has after them
        at, start = min(later)
        if glued and not text[low:at].strip():  # to the word before, as in the source
            at, place = after_word()
        else:
            place = (" " if spaced_before and at and not text[at - 1].isspace() else ""
                     ) + spans + ("" if last.end == start and not spaced else " ")
    return at, place


def _kept(text: str, wanted: Sequence[Span], lost: Sequence[Span],
          rules: SpanRules) -> dict[int, Span]:
    """The span of ``text`` that each span of the source not ``lost`` is, by the source span's
    start: the ``n``-th copy of a span in the output is its ``n``-th copy not lost in the
    source (the copies lost are the last)."""
    missing = {s.start for s in lost}
    copies: dict[str, list[int]] = {}
    for s in wanted:
        if s.start not in missing:
            copies.setdefault(s.text, []).append(s.start)
    kept: dict[int, Span] = {}
    seen: Counter[str] = Counter()
    for s in rules.find(text):
        if seen[s.text] < len(copies.get(s.text, [])):
            kept[copies[s.text][seen[s.text]]] = s
        seen[s.text] += 1
    return kept


def _by_position(text: str, source: str, wanted: Sequence[Span], lost: Sequence[Span],
                 words: list[int], rules: SpanRules, spaced: bool) -> str:
    """``text`` with each of the ``lost`` spans between its words at the share of the source's
    ``words`` (:func:`_prose_words`) before it, at the end when none comes after it; between
    the spans the output kept there in the source's order (:func:`_kept`); spans bound for the
    same place go there together in the source's order (a lost ``<b>`` and ``</b>`` never come
    back as ``</b> <b>``); a lost tag pair around words in the source goes around a word
    at least (``<code>we</code>``, never ``<code> </code>``)."""
    out = _output_words(text, rules)
    kept = [(span, start) for start, span in _kept(text, wanted, lost, rules).items()]
    word_of: dict[int, int] = {}  # lost span's start -> the word it goes before
    for s in lost:
        share, after = _prose_share(words, s)
        word_of[s.start] = min(round(share * len(out)), len(out)) if after else len(out)
    marks = [s for s in wanted if s.kind == "tags"]
    placed = [s.start for s in marks if s.start in word_of]  # lost tags, in the source's order
    for a, b in tags.pairs([s.text for s in marks]):
        opening, closing = marks[a], marks[b]
        if (out and word_of.get(opening.start, -1) == word_of.get(closing.start)
                and bisect.bisect_left(words, closing.start) > bisect.bisect_left(
                    words, opening.end)):  # words between them in the source: one here too
            before = placed.index(opening.start)
            if word_of[opening.start] < len(out):
                word_of[closing.start] += 1
            elif not before or word_of[placed[before - 1]] < len(out):
                word_of[opening.start] -= 1
    for a, b in zip(placed, placed[1:], strict=False):  # in the source's order still: nested
        word_of[b] = max(word_of[b], word_of[a])
    runs: dict[tuple[int, int], list[Span]] = {}  # (word, kept spans before it) -> its spans
    for s in lost:
        runs.setdefault((word_of[s.start], sum(i < s.start for _, i in kept)), []).append(s)
    places = [(*_insert(text, source, run, k, out, kept, spaced), order)
              for order, ((k, _), run) in enumerate(runs.items())]
    for at, spans, _ in sorted(places, key=lambda p: (p[0], p[2]), reverse=True):
        text = text[:at] + spans + text[at:]  # the last first: the others stay put (at one
        # offset, the source's later first: the earlier goes before it)
    return text


def _beside_kept(text: str, source: str, wanted: Sequence[Span], lost: Sequence[Span],
                 rules: SpanRules) -> tuple[str, list[Span]]:
    """``text`` with the ``lost`` spans that the source glues to a span the output kept
    (:func:`_kept`) put beside that span as the source has them (``<b>%s</b>``, only ``%s``
    kept: ``<b>`` and ``</b>`` around it; ``%s%s``, one kept: the other after it), and the
    spans still lost."""
    kept = _kept(text, wanted, lost, rules)
    waiting = {s.start for s in lost}
    inserts: list[tuple[int, int, str]] = []  # (offset, order, text)
    for i, anchor in enumerate(wanted):
        there = kept.get(anchor.start)
        if there is None:
            continue
        before: list[Span] = []
        j = i
        while (j > 0 and wanted[j - 1].start in waiting
               and wanted[j - 1].end == wanted[j].start):
            j -= 1
            before.insert(0, wanted[j])
        after: list[Span] = []
        j = i
        while (j + 1 < len(wanted) and wanted[j + 1].start in waiting
               and wanted[j].end == wanted[j + 1].start):
            j += 1
            after.append(wanted[j])
        if before:
            inserts.append((there.start, 2 * i, "".join(s.text for s in before)))
        if after:
            inserts.append((there.end, 2 * i + 1, "".join(s.text for s in after)))
        waiting -= {s.start for s in before + after}
    for offset, _, spans in sorted(inserts, reverse=True):
        text = text[:offset] + spans + text[offset:]
    return text, [s for s in lost if s.start in waiting]


def _misordered(wanted: Sequence[Span], kept: Sequence[Span],
                missing: Counter[str]) -> list[Span]:
    """The tags of ``kept`` (the output's spans that the source has) not nested as the
    source's (:func:`misplaced_tags`), but for those a ``missing`` tag (source span text ->
    copies the output lacks) would pair with: ``<b>Enregistrer`` lacks its ``</b>``, which goes
    back as a lost span; ``</b> ici <b>`` lacks nothing and is out of order."""
    partners = Counter((tags.name(t), not t.startswith("</")) for t in missing.elements()
                       if t.startswith("<") and tags.name(t))
    out = []
    for s in misplaced_tags(wanted, kept):
        mine = (tags.name(s.text), s.text.startswith("</"))
        if partners[mine]:
            partners[mine] -= 1
        else:
            out.append(s)
    return out


def _sorted_out(wanted: Sequence[Span], found: Sequence[Span], every_tag: bool
                ) -> tuple[list[Span], list[Span], list[Span], list[Span]]:
    """The output's spans ``found`` against the source's ``wanted``: those it kept, those it
    invented, the tags it kept to put again (out of order, :func:`_misordered`; all of them
    when ``every_tag``), and the source's spans it lost (those put again too; of a repeated
    span, the last copies)."""
    need = Counter(s.text for s in wanted)
    kept: list[Span] = []
    extra: list[Span] = []
    for s in found:
        if need[s.text] > 0:
            need[s.text] -= 1
            kept.append(s)
        else:
            extra.append(s)
    moved = ([s for s in kept if s.kind == "tags"] if every_tag
             else _misordered(wanted, kept, need))
    kept = [s for s in kept if s not in moved]
    need.update(s.text for s in moved)
    lost: list[Span] = []
    for s in reversed(wanted):
        if need[s.text] > 0:
            need[s.text] -= 1
            lost.insert(0, s)
    return kept, extra, moved, lost


def repair_line(source: str, output: str, rules: SpanRules, guess: bool = True,
                _again: int = 0) -> Repair:
    """``output`` with exactly the spans of ``source``, its tags nested as the source's (see
    the module docstring); without ``guess``, the spans that only a guess would place are
    returned as ``unplaced``. A line that the guesses leave with its tags out of order goes
    through again (``_again``, the pass): the tags out of order put again (pass 1), then
    every tag of the line (pass 2, the last: tags placed by position alone come in the
    source's order)."""
    wanted = rules.find(source)
    found = rules.find(output)
    if not wanted and not found:
        return Repair(output)
    n = len(wanted)
    if max(n, len(found)) > MAX_SPANS:  # no sentence: as written, said unless it holds them
        want, got = Counter(s.text for s in wanted), Counter(s.text for s in found)
        return Repair(output, n, unplaced=tuple((want - got).elements())
                      or tuple((got - want).elements()))
    kept, extra, moved, lost = _sorted_out(wanted, found, every_tag=_again == 2)
    if not lost and not extra:
        return Repair(output, n)
    taken = [(s.start, s.end) for s in kept]
    edits: list[tuple[int, int, str]] = [(s.start, s.end, "") for s in moved]
    restored = 0

    def place(start: int, end: int, span: Span) -> None:
        nonlocal restored
        edits.append((start, end, span.text))
        taken.append((start, end))
        lost.remove(span)
        restored += 1

    for s in list(extra):  # 1. an invented span of a lost one's kind takes its place
        twin = next((x for x in lost if x.kind == s.kind), None)
        if twin is not None:
            extra.remove(s)
            place(s.start, s.end, twin)
    for s in list(lost):  # 1. a garbled copy
        for m in _variant(s.text).finditer(output):
            if m.group() != s.text and _free(m.start(), m.end(), taken + [
                    (x.start, x.end) for x in extra + moved]):
                place(m.start(), m.end(), s)
                break
    marks = [m for m in _UNKNOWN.finditer(output)
             if _free(m.start(), m.end(), taken + [(x.start, x.end) for x in extra + moved])]
    for s, m in zip(list(lost), marks, strict=False):  # 2. the unknown marks, in order
        place(m.start(), m.end(), s)
    removed = len(extra)
    edits += [(s.start, s.end, "") for s in extra]
    text = _apply(output, edits)
    want = Counter(s.text for s in wanted)
    misordered = tuple(s.text for s in moved)
    if not lost:
        spans = rules.find(text)
        got = Counter(s.text for s in spans)
        wrong = tuple((want - got).elements()) or tuple((got - want).elements())
        misplaced = [] if wrong else misplaced_tags(wanted, spans)
        if misplaced:  # put back out of order
            again = _retried(source, [text], rules, _again) if guess else None
            if again is not None:
                return replace(again, restored=min(n, restored + again.restored),
                               removed=removed + again.removed)
            misordered = wrong = tuple(s.text for s in misplaced)
        return Repair(text, n, restored, 0, removed, wrong, misordered if wrong else ())
    if not guess:
        return Repair(text, n, restored, 0, removed, tuple(s.text for s in lost), misordered)
    words = _prose_words(source, wanted)
    disordered = None  # the first guess with the right spans and its tags out of order
    for beside in (True, False):  # 3. beside a kept neighbour, unless that made another span
        base, rest = _beside_kept(text, source, wanted, lost, rules) if beside else (text, lost)
        for spaced in (False, True):  # spaced apart when joining made another span of them
            placed = _by_position(base, source, wanted, rest, words, rules, spaced)
            found = rules.find(placed)
            if holds_exactly(wanted, found):
                return Repair(placed, n, restored + len(lost), len(lost), removed)
            if disordered is None and Counter(s.text for s in found) == want:
                disordered = placed
    if any(s.kind == "tags" for s in wanted):  # ``</b> a <b>``: its tags put again
        again = _retried(source, [t for t in (disordered, text) if t is not None], rules,
                         _again)
        if again is not None:  # a span put back twice counts once
            put = min(n, restored + len(lost) + again.restored)
            return replace(again, restored=put, guessed=min(put, len(lost) + again.guessed),
                           removed=removed + again.removed)
    return Repair(text, n, restored, 0, removed, tuple(s.text for s in lost) or tuple(want),
                  misordered)


def _retried(source: str, starts: Sequence[str], rules: SpanRules, after: int) -> Repair | None:
    """The first repair of ``source`` from one of ``starts`` (the best first) in the passes
    after ``after`` (:func:`repair_line`'s ``_again``) that places every span, or None."""
    for level in range(after + 1, 3):
        for start in starts:
            again = repair_line(source, start, rules, True, level)
            if not again.unplaced:
                return again
    return None


def span_guard(data: DataConfig, mode: str = "repair", where: str = "data.glossary",
               markup: str = "place") -> SpanGuard:
    """The guard of a run whose ``[data]`` is ``data`` (its ``spans``, ``glossary`` and
    ``terms``), in ``mode`` and ``markup``; ``where`` names the glossary in errors."""
    return SpanGuard(rules(data.spans, data.glossary, data.terms, where), mode, markup)
