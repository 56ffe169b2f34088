"""Protected spans through translation: every output keeps its source's spans, whatever
engine translated it.

:func:`guarded` wraps any engine (a function from sentences to translations) and checks each
output's spans (:mod:`nmt.data.spans`) against those of its source. A span the output lost or
garbled is restored, an invented one (a span the source does not have) is removed, and tags the
output has out of order (``</b> ici <b>``, ``<b><i></b></i>``: not nested as the source's,
:func:`nmt.data.spans.misplaced_tags`) are taken out and put again as lost ones. A source
with no letter outside its spans (``%s``, ``%s: %s``, ``--help``, ``{name}``) is its own
translation, as a translator copies it: it never reaches the engine, which would invent a
sentence around it. The places, in the order they are tried:

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
   where the output has one there (:mod:`nmt.translation.placement`).

Then the printf directives that take the next argument (``%s``, ``%d``, not ``%2$s``) are put
in the source's order where the output has them in another (:func:`in_argument_order`): a
program gives their arguments in the source's order, and ``%d ... %s`` for ``%s ... %d`` reads
a string as a number; and what is left of a directive the model garbled, the start of one
that no conversion ends (``%33``, ``%ll``), is removed as an invented span where the source is a
format string (:func:`without_remnants`). Both ``repair`` and ``strict`` do it (it guesses
nothing).

**Markup** (``markup``): with ``place`` (the default), the engine translates each source
without its tags (:func:`without_tags`) and the tags are placed in its output after the other
spans are checked: a model that has not learnt markup translates the words as it would without
it (1,000 held-out sentences with tags put in, the demo-sized model: 34.2 BLEU against 4.4 when
it sees the tags; docs/BENCHMARKS.md, "Markup"). Each tag goes on the words that render the
words it marked, as the model's attention tells (:mod:`nmt.translation.alignment`: a tag pair
around the first to the last of them, in the output's order, so ``the <b>red</b> car`` gives
``la voiture <b>rouge</b>``), where that holds the source's spans nested; by position (3)
where it does not, or where the engine gives no alignment. ``model`` gives the engine the
tags, for a model trained on markup.

``repair`` (the default) does all three and counts what it did; ``strict`` does 1 and 2 and
refuses a line that needs a guess (:class:`UnplacedSpan`, naming the spans); ``off`` leaves
outputs as the engine wrote them (from sources with their tags). The result is checked: a line
that still does not hold exactly its source's spans, its tags nested as the source's (a span
put beside a word that makes another of them, spaced apart and still not) is refused in both
modes, never given back broken. A sentence of more than :data:`MAX_SPANS` spans, source or
output (a minified page or a data dump, not a sentence), is not repaired but refused the same
way, as the engine wrote it: placing each of its spans would cost the square of their number.

The engine's attention places only the tags of ``place`` (their words are what the model
translated); a lost placeholder goes by 1-3, since where the model dropped it, its attention
says nothing of where it belonged. Both engines give the same attention (CTranslate2's
``return_attention``, its export averaging the heads nmt averages), so one rule holds for
both. Masking spans with sentinels before encoding (``nmt.data.spans.mask``) is not done: no
model trained today has seen a sentinel.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from nmt.arguments import option
from nmt.config import DataConfig
from nmt.data.spans import (
    Span,
    SpanRules,
    argument_order,
    holds_exactly,
    misplaced_tags,
    printf,
    rules,
    tags,
)
from nmt.errors import DataError, shown
from nmt.translation.alignment import WordAlignment
from nmt.translation.placement import CLOSING, beside_kept, by_position, prose_words, tags_on_words

MODES = ("repair", "strict", "off")
MARKUP = ("place", "model")  # tags taken out before the engine and placed after it, or not
UNKNOWN_MARKS = ("⁇", "<unk>")  # SentencePiece's surface of an unknown piece; the word tokenizer's
_UNKNOWN = re.compile("|".join(re.escape(m) for m in UNKNOWN_MARKS))
MAX_SPANS = 100  # spans of a sentence the repair takes on (a sentence of prose has a few)
_AFTER_A_WORD = CLOSING + ",)]»”"  # punctuation that follows a word with no space before it
_ENCLOSING = ("»«", "«»", '""', "''", "„“", "“”", "‘’", "`'", "()", "[]", "「」")


def _shown(spans: Sequence[str]) -> str:
    return ", ".join(shown(s) for s in spans[:5]) + (
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
        return self.of_line(self.index + first_line)

    def of_line(self, index: int) -> UnplacedSpan:
        """The same error, said of line ``index`` (counted from 0)."""
        return UnplacedSpan(index, self.spans, self.strict, self.misordered)


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
    reordered: int = 0  # sentences whose directives were put in the source's order

    def since(self, before: SpanCounts) -> SpanCounts:
        return SpanCounts(*(a - b for a, b in zip(self.as_tuple(), before.as_tuple(),
                                                  strict=True)))

    def as_tuple(self) -> tuple[int, ...]:
        return (self.sentences, self.with_spans, self.repaired, self.restored, self.guessed,
                self.removed, self.unplaced, self.reordered)

    def summary(self) -> str:
        """One line, for the warning ``nmt translate`` prints (empty when nothing changed)."""
        if not self.repaired and not self.unplaced:
            return ""
        guessed = f", {self.guessed} of them placed by position" if self.guessed else ""
        unplaced = (f"; in {self.unplaced} sentence{'s' if self.unplaced > 1 else ''} not every "
                    "span could be placed" if self.unplaced else "")
        reordered = f", {self.reordered} put in the source's order" if self.reordered else ""
        return (f"spans repaired in {self.repaired} of {self.sentences} sentences: {self.restored} "
                f"restored{guessed}, {self.removed} invented removed{reordered}{unplaced} "
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


def only_spans(source: str, spans: Sequence[Span]) -> bool:
    """Whether ``source`` holds spans (``spans``, its spans in order) and no letter of any
    script outside them: ``%s``, ``%s: %s``, ``--help``, ``{name}``, ``<b>%d</b>``, a URL or
    a glossary term alone. A translator copies such a string as it is; a model given ``%s``
    alone invents a sentence around it (``Assignez-vous ! %s``), and no repair removes words."""
    outside, at = [], 0
    for span in spans:
        outside.append(source[at:span.start])
        at = max(at, span.end)
    return at > 0 and not any(ch.isalpha() for ch in "".join(outside) + source[at:])


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


Aligner = Callable[[Sequence[str], Sequence[str]], list[WordAlignment | None]]


def guarded(translate: Callable[[list[str]], list[str]], sources: Sequence[str],
            guard: SpanGuard | None, align: Aligner | None = None) -> list[str]:
    """``translate(sources)``, each output checked against its source's spans by ``guard``
    (None, or mode ``off``: as translated). :class:`UnplacedSpan` for a line ``strict``
    cannot place, counted from 0 within ``sources``; ``repair`` keeps such a line as far as it
    could repair it and counts it (:attr:`SpanCounts.unplaced`), so one line never stops a
    whole file. With ``guard.markup`` ``place``, the engine translates each source without
    its tags (:func:`without_tags`), and the tags are placed in its output after the other
    spans are checked (the third place of the module docstring); what the counts say is the
    check of the other spans. ``align`` (sources without their tags, their translations ->
    :class:`~nmt.translation.alignment.WordAlignment` or None) tells the engine's word for
    each source word: tags go on the words they marked where it does, by position where it
    does not (or none is given). A line of more than :data:`MAX_SPANS` spans, which is not
    repaired, goes to the engine as written. A source with no letter outside its spans
    (:func:`only_spans`) is its own translation, as written: it never reaches the engine."""
    if guard is None or guard.mode == "off":
        return translate(list(sources))
    found = [guard.rules.find(s) for s in sources]
    copied = {i for i, s in enumerate(sources) if only_spans(s, found[i])}
    bare = [without_tags(s, guard.rules) if guard.markup == "place" and i not in copied else s
            for i, s in enumerate(sources)]
    bare = [b if len(spans) <= MAX_SPANS else s  # not repaired: as written
            for s, b, spans in zip(sources, bare, found, strict=True)]
    asked = [i for i in range(len(sources)) if i not in copied]
    outputs = list(sources)  # a copied source is its own output, checked as any other
    for i, output in zip(asked, translate([bare[i] for i in asked]) if asked else [],
                         strict=True):
        outputs[i] = output
    repairs = [repair_line(plain, output, guard.rules, guess=guard.mode == "repair")
               for plain, output in zip(bare, outputs, strict=True)]
    untagged = [i for i, (s, b) in enumerate(zip(sources, bare, strict=True)) if s != b]
    alignments: dict[int, WordAlignment | None] = {}
    if align is not None and untagged:
        alignments = dict(zip(untagged, align([bare[i] for i in untagged],
                                              [repairs[i].text for i in untagged]),
                              strict=True))
    fixed = []
    counts = guard.counts
    for i, (source, plain, output) in enumerate(zip(sources, bare, outputs, strict=True)):
        repair = repairs[i]
        changed = repair.text != output
        if plain != source:  # the tags taken out, placed again (the line's final check)
            tagged = repair_line(source, repair.text, guard.rules,
                                 alignment=alignments.get(i))
            repair = replace(repair, text=tagged.text, spans=tagged.spans,
                             unplaced=repair.unplaced or tagged.unplaced,
                             misordered=repair.misordered or tagged.misordered)
        if repair.unplaced and guard.mode == "strict":
            raise UnplacedSpan(i, repair.unplaced, misordered=repair.misordered)
        if "%" in source:  # a format string's directives, as a program formats them
            ordered = in_argument_order(source, repair.text, guard.rules)
            counts.reordered += ordered != repair.text
            ordered, remnants = without_remnants(source, ordered, guard.rules)
            counts.removed += remnants
            if remnants:  # what is left may read as a span (``{%}`` -> ``{}``): checked again
                again = repair_line(source, ordered, guard.rules, guess=guard.mode == "repair")
                if again.unplaced and guard.mode == "strict":
                    raise UnplacedSpan(i, again.unplaced, misordered=again.misordered)
                ordered, counts.removed = again.text, counts.removed + again.removed
                repair = replace(repair, unplaced=repair.unplaced or again.unplaced)
            changed |= ordered != repair.text
            repair = replace(repair, text=ordered)
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


def _with_its_copy(text: str, start: int, end: int, span: str,
                   taken: list[tuple[int, int]]) -> tuple[int, int]:
    """A garbled copy of ``span`` or an unknown mark at ``start:end`` of ``text``, with what is
    left around it of the copy: the characters next to it (no space, none taken) that read
    with it as ``span`` with characters missing (``%⁇s``, ``{na⁇e}``, ``{⁇name}``), where they
    hold one of its signs, not only letters or digits (``les⁇`` keeps its ``s``); else
    ``start:end`` alone."""
    def fits(a: int, b: int) -> bool:
        left = iter(span)
        return _free(a, b, taken) and all(c in left for c in _UNKNOWN.sub("", text[a:b]))

    a, b = start, end
    while a > 0 and not text[a - 1].isspace() and fits(a - 1, b):
        a -= 1
    while b < len(text) and not text[b].isspace() and fits(a, b + 1):
        b += 1
    swallowed = text[a:start] + text[end:b]
    return (a, b) if any(not c.isalnum() for c in swallowed) else (start, end)


def _in_place(output: str, lost: list[Span], extra: list[Span], moved: Sequence[Span],
              taken: list[tuple[int, int]], edits: list[tuple[int, int, str]],
              last_pass: bool) -> int:
    """Steps 1 and 2 of :func:`repair_line`: the ``edits`` to ``output`` that put its garbled
    copies of ``lost`` spans right, give an ``extra`` (invented) span's place to a lost one of
    its kind and fill its unknown marks with the lost spans in order; the spans put back are
    taken out of ``lost`` (and their twins out of ``extra``), their places added to ``taken``,
    and their number returned. In the ``last_pass``, which puts every tag again by position,
    a garbled copy of a tag is removed instead: in its place it may not nest."""
    restored = 0

    def busy() -> list[tuple[int, int]]:  # the places taken, and those of spans to go
        return taken + [(x.start, x.end) for x in [*extra, *moved]]

    def place(start: int, end: int, span: Span) -> None:
        nonlocal restored
        text = span.text  # apart from a word the copy was not glued to (``--idid-id=STLE]``:
        if (text[-1:].isalnum() and output[end:end + 1].isalnum()  # ``--build-id STLE]``)
                and not output[end - 1:end].isalnum()):
            text += " "
        edits.append((start, end, text))
        taken.append((start, end))
        lost.remove(span)
        restored += 1

    for s in list(extra):  # 1. an invented span of a lost one's kind takes its place, with
        # what is left of the copy beside it (``--for⁇ce``: ``--for`` read as an option)
        twin = next((x for x in lost if x.kind == s.kind), None)
        if twin is not None:
            extra.remove(s)
            place(*_with_its_copy(output, s.start, s.end, twin.text, busy()), twin)
    for s in list(lost):  # 1. a garbled copy
        for m in _variant(s.text).finditer(output):
            places = busy()
            if m.group() != s.text and _free(m.start(), m.end(), places):
                copy = _with_its_copy(output, m.start(), m.end(), s.text, places)
                if last_pass and s.kind == "tags":  # a space where it parted words
                    # (``open</ i>--force``: a tag may go between them)
                    before, after = output[copy[0] - 1:copy[0]], output[copy[1]:copy[1] + 1]
                    parted = before.strip() and after.strip() and after not in _AFTER_A_WORD
                    edits.append((*copy, " " if parted else ""))
                    taken.append(copy)
                else:
                    place(*copy, s)
                break
    marks = [m for m in _UNKNOWN.finditer(output) if _free(m.start(), m.end(), busy())]
    for s, m in zip(list(lost), marks, strict=False):  # 2. the unknown marks, in order
        place(*_with_its_copy(output, m.start(), m.end(), s.text, busy()), s)
    return restored


def _apply(text: str, edits: list[tuple[int, int, str]]) -> str:
    """``text`` with ``(start, end, replacement)`` edits made; a removal takes the quotes or
    brackets it leaves empty and a space with it, so that no double space or space before
    punctuation is left."""
    for start, end, new in sorted(edits, reverse=True):
        if not new:
            if start and text[start - 1:start] + text[end:end + 1] in _ENCLOSING:
                start, end = start - 1, end + 1
            before, after = text[:start], text[end:]
            if before.endswith(" ") and (not after or after[0] in " " + _AFTER_A_WORD):
                start -= 1
            elif not before.strip() and after.startswith(" "):
                end += 1
        text = text[:start] + new + text[end:]
    return text


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
                _again: int = 0, alignment: WordAlignment | None = None) -> Repair:
    """``output`` with exactly the spans of ``source``, its tags nested as the source's (see
    the module docstring); without ``guess``, the spans that only a guess would place are
    returned as ``unplaced``. With an ``alignment`` of ``source`` without its tags and
    ``output``, lost tags go first on the words that render the words they marked
    (:func:`~nmt.translation.placement.tags_on_words`), by position where that does not hold
    the source's spans nested. A line that the guesses leave with its tags out of order goes
    through again (``_again``, the pass): the tags out of order put again (pass 1), then
    every tag of the line (pass 2, the last: tags placed by position alone come in the
    source's order; a garbled copy of a tag, ``</ em>``, is removed there, not put right
    where it stands)."""
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
    edits = [(s.start, s.end, "") for s in moved]
    restored = _in_place(output, lost, extra, moved, [(s.start, s.end) for s in kept], edits,
                         last_pass=_again == 2)
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
            again = _retried(source, [text, output], rules, _again) if guess else None
            if again is not None:
                return replace(again, restored=min(n, restored + again.restored),
                               removed=removed + again.removed)
            misordered = wrong = tuple(s.text for s in misplaced)
        return Repair(text, n, restored, 0, removed, wrong, misordered if wrong else ())
    if not guess:
        return Repair(text, n, restored, 0, removed, tuple(s.text for s in lost), misordered)
    words = prose_words(source, wanted)
    disordered = None  # the first guess with the right spans and its tags out of order
    tries = [(spaced, beside, aligned) for spaced in (False, True) for beside in (True, False)
             for aligned in ((True, False) if alignment is not None else (False,))]
    for spaced, beside, aligned in tries:  # 3. beside a kept neighbour, unless that made
        # another span; the lost tags left on their words, where the alignment tells; spaced
        # apart only when none joined as the source holds the source's spans
        base, rest = beside_kept(text, source, wanted, lost, rules) if beside else (text, lost)
        on_words = (tags_on_words(base, source, wanted, rest, rules, alignment)
                    if aligned and alignment is not None else {})
        if aligned and not on_words:
            continue
        placed = by_position(base, source, wanted, rest, words, rules, spaced, on_words)
        found = rules.find(placed)
        if holds_exactly(wanted, found):
            return Repair(placed, n, restored + len(lost), len(lost), removed)
        if disordered is None and Counter(s.text for s in found) == want:
            disordered = placed
    if any(s.kind == "tags" for s in wanted):  # ``</b> a <b>``: its tags put again
        again = _retried(source, [t for t in (disordered, text, output) if t is not None],
                         rules, _again)
        if again is not None:  # a span put back twice counts once
            put = min(n, restored + len(lost) + again.restored)
            return replace(again, restored=put, guessed=min(put, len(lost) + again.guessed),
                           removed=removed + again.removed)
    return Repair(text, n, restored, 0, removed, tuple(s.text for s in lost) or tuple(want),
                  misordered)


def in_argument_order(source: str, text: str, rules: SpanRules) -> str:
    """``text`` with the printf directives that take the next argument (``%s``, ``%d``; not
    ``%2$s``: :func:`~nmt.data.spans.argument_order`) in the source's order, where it holds the
    same ones in another (``%d ... %s`` for ``%s ... %d``: formatting it would read a number as
    a string, or crash): the source's first where the text has its first, and so on, the
    words as they are. Else ``text`` as it is."""
    spans = rules.find(text)
    want, got = argument_order(rules.find(source)), argument_order(spans)
    if got == want or sorted(got) != sorted(want):
        return text
    ordered = text
    directives = [s for s in spans if s.kind == "printf" and printf.in_order(s.text)]
    for span, directive in sorted(zip(directives, want, strict=True), key=lambda p: -p[0].start):
        ordered = ordered[:span.start] + directive + ordered[span.end:]
    again = rules.find(ordered)  # the same spans (none joined to a neighbour), in order now
    same = sorted(s.text for s in again) == sorted(s.text for s in spans)
    return ordered if same and argument_order(again) == want else text


def without_remnants(source: str, text: str, rules: SpanRules) -> tuple[str, int]:
    """``text`` without the starts of printf directives that no conversion ends (``%33``,
    ``%ll``, ``%.*``, a ``%`` alone: :func:`~nmt.data.spans.printf.remnants`) beyond those its
    source has, where the source is a format string (holds a printf span), and how many went:
    what is left of a directive a model garbled (``%3u %3u`` -> ``%33 %3u %3u``) makes
    formatting the string fail. (A format string writes a percent sign ``%%``, a span.)"""
    in_source = rules.find(source)
    if not any(s.kind == "printf" for s in in_source):
        return text, 0
    allowed = Counter(source[a:b] for a, b in printf.remnants(
        source, [(s.start, s.end) for s in in_source]))
    extra = []
    for a, b in printf.remnants(text, [(s.start, s.end) for s in rules.find(text)]):
        if allowed[text[a:b]]:
            allowed[text[a:b]] -= 1
        else:
            extra.append((a, b))
    for a, b in reversed(extra):  # with a space beside it, where it stood apart
        if text[a - 1:a].isspace() and (b == len(text) or text[b].isspace()):
            a -= 1
        elif a == 0 and text[b:b + 1].isspace():
            b += 1
        text = text[:a] + text[b:]
    return text, len(extra)


def _retried(source: str, starts: Sequence[str], rules: SpanRules, after: int) -> Repair | None:
    """The first repair of ``source`` from one of ``starts`` (the best first; the output as
    the model wrote it last, where a garbled copy of a tag put right in its place stands in
    the others) in the passes after ``after`` (:func:`repair_line`'s ``_again``) that places
    every span, or None."""
    for level in range(after + 1, 3):
        for start in dict.fromkeys(starts):
            again = repair_line(source, start, rules, True, level)
            if not again.unplaced:
                return again
    return None


def span_guard(data: DataConfig, mode: str = "repair", where: str = "data.glossary",
               markup: str = "place") -> SpanGuard:
    """The guard of a run whose ``[data]`` is ``data`` (its ``spans``, ``glossary`` and
    ``terms``), in ``mode`` and ``markup``; ``where`` names the glossary in errors."""
    return SpanGuard(rules(data.spans, data.glossary, data.terms, where), mode, markup)
