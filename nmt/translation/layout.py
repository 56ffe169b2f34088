"""Lines as written in, lines as written out: the spacing of a line comes back as in the source,
and a line of several sentences reaches the model a sentence at a time.

A model is trained on single, normalised sentences (:func:`nmt.data.normalize.normalize`
collapses every run of whitespace to one space and strips the ends). So a line is cut into the
pieces it is given, and the translations are put back between the line's own spacing. The rule,
in one place (:func:`lay_out`):

1. **The ends**: the whitespace (and escaped ``\\n``/``\\t``) a line starts and ends with is
   kept as written. A line of only whitespace, and an empty line, come back unchanged.
2. **Segments**: inside a line, a run of whitespace that is anything but one ordinary space
   (two or more spaces, a tab, or any run holding an escaped ``\\n`` or ``\\t``: the
   two characters of a software string, not preceded by another backslash) separates segments,
   unless it stands inside a protected span where the caller names them (``<a  href="...">``,
   ``{n, plural,  one {# file}  other {# files}}``: cut apart, no half is the span).
   Each segment is translated on its own and the run is put back as written, so the columns
   of ``  -f, --force        do not prompt`` stay aligned and ``Usage:\\n  nmt [OPTIONS]``
   keeps its escapes. One space (U+0020, or another space character such as U+00A0 before a
   French ``!``) is spacing inside a sentence, which the translation spells as it will.
3. **Sentences**: with a splitter (:func:`sentence_splitter`, the default), each segment is cut
   into sentences, and what stood between two sentences (one space, or nothing in Chinese and
   Japanese) is put back between their translations, unless the translation ends a sentence
   as the other script does (:func:`_between_sentences`): after a full-width mark (``。``,
   ``！``, ``？``) nothing, where the source's sentence ended with an ordinary one; one space,
   where the source's ended with a full-width mark and the translation does not
   (``我爱你。你好。`` -> ``I love you. Hello.``; ``Open it. Save it.`` ->
   ``開きます。保存します。``).
4. **Nothing to translate**: a segment or sentence without a letter of any script (``42``,
   ``--``, ``*``, ``...``) is kept as written, not given to the model.

What is kept as written is written clean, as the model's input is: invisible characters
(controls, format characters such as U+200B) are left out, and whitespace other than spaces and
tabs (a form feed, U+2028, a lone carriage return) is one space, so an output line is always one
printable line (:func:`_clean`).

All the pieces of all the lines go to the engine as one batch (:func:`translate_laid_out`), so
a paragraph's sentences are decoded together, as sentences of separate lines are.

A string of a localisation file is laid out by this rule too: :mod:`nmt.localisation` only cuts
it into its lines and joins their translations again, so a PO string's indentation and its
leading and trailing ``\\n`` come back as in its ``msgid``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

Splitter = Callable[[str], list[str]]  # a segment -> its sentences, in order
Protected = Callable[[str], Sequence[tuple[int, int]]]  # a text -> its spans (start, end)
Engine = Callable[[list[str]], list[str]]  # a batch of sentences -> their translations

# whitespace, or an escaped \n or \t that no backslash escapes in turn
_RUN = re.compile(r"(?:\s|(?<!\\)\\[nt])+")


def _separates(run: str) -> bool:
    """Whether a run of whitespace and escapes inside a line cuts it into segments: all but one
    space character (category Zs: U+0020, U+00A0, U+202F, ...)."""
    return len(run) > 1 or unicodedata.category(run) != "Zs"


def _clean(text: str) -> str:
    """``text`` kept as written, without what a line of output must not hold: spaces (category
    Zs) and tabs as they are, other whitespace as one space, invisible characters (categories
    Cc, Cf, Cs) left out (the normalisation's rule, :mod:`nmt.data.normalize`)."""
    if text.isprintable():
        return text
    return "".join(ch if ch == "\t" or unicodedata.category(ch) == "Zs" else
                   " " if ch.isspace() else
                   "" if unicodedata.category(ch) in ("Cc", "Cf", "Cs") else ch for ch in text)


def has_letter(text: str) -> bool:
    """Whether ``text`` holds a letter of any script: what the model is given."""
    return any(ch.isalpha() for ch in text)


@dataclass
class Layout:
    """Lines cut into the pieces an engine translates (:func:`lay_out`).

    ``segments`` go to the engine; each line is a list of its parts, each either text kept as
    written (``str``) or the index of its translation among ``segments`` (``int``);
    ``line_of[i]`` is the line segment ``i`` came from."""

    segments: list[str] = field(default_factory=list)
    lines: list[list[str | int]] = field(default_factory=list)
    line_of: list[int] = field(default_factory=list)

    def join(self, translations: Sequence[str]) -> list[str]:
        """The lines with each segment replaced by its translation (``translations[i]`` for
        ``segments[i]``) between the spacing of the source."""
        if len(translations) != len(self.segments):
            raise ValueError(f"{len(translations)} translations for {len(self.segments)} "
                             "segments")
        out = []
        for parts in self.lines:
            text = []
            for i, p in enumerate(parts):
                previous = parts[i - 1] if i else None
                following = parts[i + 1] if i + 1 < len(parts) else None
                if isinstance(p, int):
                    if isinstance(previous, int):  # two sentences with nothing between
                        text.append(_between_sentences(self.segments[previous],
                                                       translations[previous], ""))
                    text.append(translations[p])
                elif (isinstance(previous, int) and isinstance(following, int)
                      and len(p) == 1 and p.isspace()):  # the space between two sentences
                    text.append(_between_sentences(self.segments[previous],
                                                   translations[previous], p))
                else:
                    text.append(p)
            out.append("".join(text))
        return out


def _between_sentences(source: str, translation: str, gap: str) -> str:
    """What goes between a translated sentence and the next, where ``gap`` (one space, or
    nothing) stood after the sentence ``source`` in the source: ``gap``, unless ``translation``
    ends otherwise than ``source`` does: after a full-width mark that ends a sentence (``。``,
    ``！``, ``？``, ``」``) nothing, after an ordinary one a space."""
    wide = _ends_wide(translation)
    if wide == _ends_wide(source):
        return gap
    return "" if wide else " "


def _ends_wide(sentence: str) -> bool:
    last = sentence[-1:]
    return bool(last) and unicodedata.east_asian_width(last) in "WF" and unicodedata.category(
        last).startswith("P")


def lay_out(lines: Sequence[str], split: Splitter | None = None,
            protected: Protected | None = None) -> Layout:
    """Cut ``lines`` by the rule of this module; ``split`` cuts a segment into sentences (None:
    a segment is translated whole); no segment ends inside a span ``protected`` finds."""
    layout = Layout()
    for number, line in enumerate(lines):
        parts: list[str | int] = []

        def keep(text: str, parts: list[str | int] = parts) -> None:
            text = _clean(text)
            if text:
                parts.append(text)

        def translate(text: str, parts: list[str | int] = parts, number: int = number) -> None:
            if not has_letter(text):
                keep(text)
                return
            parts.append(len(layout.segments))
            layout.segments.append(text)
            layout.line_of.append(number)

        start = 0
        cuts = [run for run in _RUN.finditer(line)
                if run.start() == 0 or run.end() == len(line) or _separates(run.group())]
        # the spans are looked for only where a run inside the line would cut it
        inner = any(0 < run.start() and run.end() < len(line) for run in cuts)
        spans = protected(line) if protected is not None and inner else ()
        for run in cuts:
            if any(a < run.start() and run.end() < b for a, b in spans):
                continue
            for text, is_sentence in _sentences(line[start:run.start()], split):
                (translate if is_sentence else keep)(text)
            keep(run.group())
            start = run.end()
        for text, is_sentence in _sentences(line[start:], split):
            (translate if is_sentence else keep)(text)
        layout.lines.append(parts)
    return layout


def _sentences(segment: str, split: Splitter | None) -> list[tuple[str, bool]]:
    """``segment`` (no whitespace at its ends) as its sentences and the text between them,
    each paired with whether it is a sentence; the whole segment when ``split`` is None or its
    sentences are not found in it as written."""
    if not segment:
        return []
    if split is None:
        return [(segment, True)]
    out: list[tuple[str, bool]] = []
    at = 0
    for piece in split(segment):
        sentence = piece.strip()
        if not sentence:
            continue
        found = segment.find(sentence, at)
        if found < 0:  # the splitter changed the text: translate the segment whole
            return [(segment, True)]
        if found > at:
            out.append((segment[at:found], False))
        out.append((sentence, True))
        at = found + len(sentence)
    if at < len(segment):
        out.append((segment[at:], False))
    return out


def translate_laid_out(lines: Sequence[str], translate: Engine,
                       split: Splitter | None = None,
                       protected: Protected | None = None) -> list[str]:
    """``lines`` translated by ``translate`` (one call, every segment of every line) and laid
    out as the source (see the module docstring)."""
    layout = lay_out(lines, split, protected)
    return layout.join(translate(layout.segments) if layout.segments else [])


def sentence_splitter(lang: str | None, keep: Protected | None = None) -> Splitter:
    """The sentences of a text in ``lang`` (an ISO 639 code), by sentencex: its rules for the
    language (abbreviations, decimals, quotes), through its fallback chain for a language it
    has no rules of its own for (``"gsw"`` -> German's), else its language-independent
    rule (a full stop, ``!``, ``?``, ``。``, ``।``, ``؟`` and the like before a space or
    the end). ``None`` (a run that does not name its source language) takes that rule too.
    Never inside a span that ``keep`` finds (start, end) in the text: sentencex ends a sentence
    at the full stop of ``%.*s``, so ``Print %.*s twice`` would reach the model as ``Print %.``
    and ``*s twice``."""
    import sentencex  # a small native module, loaded only when a line is split

    from nmt.data.languages import base_language

    code = base_language(lang) if lang else "und"  # sr-Latn: Serbian's rules

    def split(text: str) -> list[str]:
        pieces = list(sentencex.segment(code, text))
        if keep is None or "".join(pieces) != text:
            return pieces
        spans = keep(text)
        out: list[str] = []
        at = 0
        for piece in pieces:
            if out and any(a < at < b for a, b in spans):
                out[-1] += piece  # the piece goes on the span the one before began
            else:
                out.append(piece)
            at += len(piece)
        return out

    return split
