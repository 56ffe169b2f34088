"""Where a span the translation lost goes back (the guesses of
:mod:`nmt.translation.structure`, its third place): beside a span the output kept that the
source glues it to; a tag on the words that render the words it marked, where an alignment
(:mod:`nmt.translation.alignment`) tells them; else by position, between the output's words
at the share of the source's words before it. Each returns the text with the spans in; the
repair checks the result and tries the next way where it does not hold the source's spans,
its tags nested as the source's."""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Sequence

from nmt.data.spans import Span, SpanRules, tags
from nmt.data.spans.unspaced import LETTERS
from nmt.translation.alignment import WordAlignment

CLOSING = ".!?:;…。！？"  # punctuation that ends a sentence
_TRAILING = CLOSING + ",)]»”\"'"  # punctuation that ends a word (``Tom,``, ``(sic)``)
_WORD = re.compile(r"\S+")
_UNSPACED = re.compile(f"[{LETTERS}]")


def prose_words(source: str, spans: Sequence[Span]) -> list[int]:
    """Where the words of ``source`` start, its ``spans`` aside."""
    blank = list(source)
    for s in spans:
        blank[s.start:s.end] = " " * (s.end - s.start)
    return [m.start() for m in _WORD.finditer("".join(blank))
            if any(c.isalnum() for c in m.group())]


def _prose_share(words: list[int], span: Span) -> tuple[float, bool]:
    """The share of the source's ``words`` (:func:`prose_words`) before ``span``, and whether
    one comes after it."""
    before = bisect.bisect_left(words, span.start)
    return (before / len(words) if words else 0.0), before < len(words)


def _output_words(text: str, rules: SpanRules) -> list[re.Match[str]]:
    """The words of ``text``: runs of non-space (a span's own spaces, a tag's attributes, are
    none), those with a letter or digit outside its spans, as :func:`prose_words` counts the
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
    them (``<b>%s</b>``), and after an opening tag or before a closing one, whose words
    between them in the source are not there (``<em>that <b>cost``: ``<em><b>``); else a
    space apart (and always, when ``spaced``)."""
    out = run[0].text
    for a, b in zip(run, run[1:], strict=False):
        between = source[a.end:b.start]
        glued = between == "" or (between.strip() != "" and (
            (a.kind == "tags" and tags.opens(a.text))
            or (b.kind == "tags" and b.text.startswith("</"))))
        out += ("" if glued and not spaced else " ") + b.text
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
    if (0 < k <= len(words) and not spaced_before and source[first.start - 1].isalnum()
            and (spaced_after or not source[last.end].isalnum())):
        glued = True  # to the end of a word, before its punctuation (``Tom</b>,``)

    def after_word() -> tuple[int, str]:
        word = words[k - 1]
        at = word.end()
        if source[first.start - 1:first.start].isalnum():  # before the word's punctuation
            at = word.start() + len(text[word.start():at].rstrip(_TRAILING))
        space = spaced_after and text[at:at + 1] and not text[at].isspace() and (
            text[at] not in _TRAILING)
        return at, spans + (" " if space else "")

    if k >= len(words) and not (glued and words):
        body = text.rstrip()
        if source[last.end:].strip()[:1] in tuple(CLOSING):
            body = body.rstrip(CLOSING).rstrip()
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
        place = ("" if not spaced_before else " ") + spans + after  # glued as in the source
    elif later and at > min(later)[0]:  # before those it has after them
        at, start = min(later)
        if glued and not text[low:at].strip():  # to the word before, as in the source
            at, place = after_word()
        else:
            place = (" " if spaced_before and at and not text[at - 1].isspace() else ""
                     ) + spans + (" " if spaced_after else "")
    if (not spaced and not spaced_before and spaced_after and text[at - 1:at].isspace()
            and text[:at].strip()):  # glued to what is before it (a kept span: ``%s</b> %d``)
        at, place = len(text[:at].rstrip()), place.strip()
    before, after = text[at - 1:at], text[at:at + 1]  # (a tag goes on what it marks, as placed)
    if (first.kind != "tags" and before.strip() and place[:1].strip()
            and not _joins(source[first.start - 1:first.start], before)):
        place = " " + place
    if (last.kind != "tags" and after.strip() and place[-1:].strip()
            and not _joins(source[last.end:last.end + 1], after)):
        place += " "
    return at, place


def _joins(beside: str, there: str) -> bool:
    """Whether spans the source writes right beside the character ``beside`` go right beside
    the output's character ``there``: the same character (``« %s »``, ``%s:``), two letters
    or digits (``un<b>real``, ``word</b>``), or a letter of a script written without spaces
    (:mod:`nmt.data.spans.unspaced`). Not a letter where the source has punctuation: the
    lost ``%s`` of ``column "%s.%s" uses it`` is not glued into ``que`` (``%sque``)."""
    return beside == there or (beside.isalnum() and there.isalnum()) or bool(
        _UNSPACED.match(there))


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


def tags_on_words(text: str, source: str, wanted: Sequence[Span], lost: Sequence[Span],
                   rules: SpanRules, alignment: WordAlignment) -> dict[int, int]:
    """Where the ``lost`` tags of ``source`` go in ``text``, as the word of
    :func:`_output_words` they go before (by the tag's start in ``source``), from the
    ``alignment`` of ``source`` without its tags and ``text`` (their words separated by
    spaces): a tag pair around source words goes around the output's
    words that render them (from the first to the last of those, in the output's order),
    where it marks a word at all (not a span alone); a tag alone (``<br/>``) before the word
    that renders the source's next word. Only tags
    whose words the alignment covers, and only while ``text`` has the words of the
    translation aligned (spans glued to them may have been put back since)."""
    marks = [s for s in wanted if s.kind == "tags"]
    bare = alignment.source.split()
    spaced = list(_WORD.finditer(text))
    if (len(bare) != len(alignment.words) or len(spaced) != len(alignment.target.split())
            or not marks or not all(0 <= w < len(spaced) for w in alignment.words)):
        return {}
    inside = [False] * (len(source) + 1)  # source characters that are a tag's
    for m in marks:
        inside[m.start:m.end] = [True] * (m.end - m.start)
    before = [0]  # characters of the words (no space, no tag) before each offset
    for c, tag in zip(source, inside, strict=False):
        before.append(before[-1] + (not tag and not c.isspace()))
    ends = [0]  # the same count at the end of each word without tags
    for w in bare:
        ends.append(ends[-1] + len(w))
    if ends[-1] != before[-1]:
        return {}

    def word(char: int) -> int | None:  # the word (of ``bare``) holding that character
        return bisect.bisect_right(ends, char) - 1 if 0 <= char < ends[-1] else None

    others = [False] * len(source)  # characters of the source's other spans (``%s``)
    for m in wanted:
        if m.kind != "tags":
            others[m.start:m.end] = [True] * (m.end - m.start)
    prose = [False] * len(bare)  # words with a letter or digit outside every span
    for x, c in enumerate(source):
        if c.isalnum() and not inside[x] and not others[x]:
            prose[bisect.bisect_right(ends, before[x]) - 1] = True

    out = _output_words(text, rules)

    def first_from(target_word: int) -> int:  # the output word that target word starts
        start = spaced[target_word].start()
        return next((k for k, m in enumerate(out) if m.end() > start), len(out))

    def after(target_word: int) -> int:
        end = spaced[target_word].end()
        return sum(m.start() < end for m in out)

    missing = {s.start for s in lost}
    on: dict[int, int] = {}
    paired: set[int] = set()
    for a, b in tags.pairs([m.text for m in marks]):
        opening, closing = marks[a], marks[b]
        paired |= {opening.start, closing.start}
        first, last = word(before[opening.end]), word(before[closing.start] - 1)
        if (opening.start not in missing or closing.start not in missing or first is None
                or last is None or first > last or not any(prose[first:last + 1])):
            continue  # (around a span alone, ``<b>%s</b>``: where the span goes, by position)
        rendered = alignment.words[first:last + 1]
        opens_at, closes_at = first_from(min(rendered)), after(max(rendered))
        if closes_at > opens_at:  # (around no word, ``Warning:`` -> ``:``: by position)
            on[opening.start], on[closing.start] = opens_at, closes_at
    for m in marks:
        if m.start in missing and m.start not in paired:
            following = word(before[m.end])
            if following is not None:
                on[m.start] = first_from(alignment.words[following])
    return on


def by_position(text: str, source: str, wanted: Sequence[Span], lost: Sequence[Span],
                 words: list[int], rules: SpanRules, spaced: bool,
                 on_words: dict[int, int] | None = None) -> str:
    """``text`` with each of the ``lost`` spans between its words at the share of the source's
    ``words`` (:func:`prose_words`) before it, at the end when none comes after it; between
    the spans the output kept there in the source's order (:func:`_kept`); spans bound for the
    same place go there together in the source's order (a lost ``<b>`` and ``</b>`` never come
    back as ``</b> <b>``); a lost tag pair around words in the source goes around a word
    at least (``<code>we</code>``, never ``<code> </code>``). Tags in ``on_words`` (their
    start in the source -> the word they go before: :func:`tags_on_words`) go there, and
    the others by position."""
    on_words = on_words or {}
    out = _output_words(text, rules)
    kept = [(span, start) for start, span in _kept(text, wanted, lost, rules).items()]
    word_of: dict[int, int] = {}  # lost span's start -> the word it goes before
    for s in lost:
        share, after = _prose_share(words, s)
        word_of[s.start] = min(round(share * len(out)), len(out)) if after else len(out)
    word_of.update((start, k) for start, k in on_words.items() if start in word_of)
    marks = [s for s in wanted if s.kind == "tags" and s.start not in on_words]
    placed = [s.start for s in marks if s.start in word_of]  # lost tags, in the source's order
    opening_of: dict[int, int] = {}  # a lost closing tag's start -> its opening tag's
    for a, b in tags.pairs([s.text for s in marks]):
        opening, closing = marks[a], marks[b]
        opening_of[closing.start] = opening.start
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
    runs: dict[tuple[int, int, bool], list[Span]] = {}  # (word, kept spans before it, a
    # closing tag that ends the word before) -> its spans
    for s in lost:
        opened = opening_of.get(s.start, -1)  # (-1: unpaired in the source)
        closes = s.text.startswith("</") and (s.start in on_words or (
            word_of.get(opened, -1) < word_of[s.start] and opened not in on_words
            and not source[s.start - 1].isspace()))  # its element opened on an earlier
        # word or kept, glued to the word before in the source (``at</em> <i>these``:
        # ``un</em> <i>coup``)
        runs.setdefault((word_of[s.start], sum(i < s.start for _, i in kept), closes),
                        []).append(s)
    places = [(*_insert(text, source, run, k, out, kept, spaced), order)
              for order, ((k, _, _), run) in enumerate(runs.items())]
    for at, spans, _ in sorted(places, key=lambda p: (p[0], p[2]), reverse=True):
        text = text[:at] + spans + text[at:]  # the last first: the others stay put (at one
        # offset, the source's later first: the earlier goes before it)
    return text


def beside_kept(text: str, source: str, wanted: Sequence[Span], lost: Sequence[Span],
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
