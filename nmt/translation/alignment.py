"""Which word of a translation renders which word of its source, read from the model's
attention: where ``--markup place`` puts a source's tags in its translation
(:mod:`nmt.translation.structure`).

The translation, whichever search made it, is forced through the model (the decoder reads it
as written, as in training) and the encoder-decoder attention of the last decoder layer,
averaged over its heads (the GRU: its one Bahdanau attention), gives for each target piece a
weight on each source piece. Each source word goes to the target piece that puts the most
weight on its pieces, summed, and so to that piece's word. Every engine gives the same weights
(nmt's own forward pass, :func:`nmt.translation.search.forced_attention`; CTranslate2's
``return_attention`` of the same forced translation, its export averaging the same heads), so
this one rule places tags alike through both.

Measured (docs/BENCHMARKS.md, "Markup: tags on the words they mark"): a tag pair around a
name or number that the translation keeps as written lands around it in 99% of lines through
the demo-sized models, against 49-58% by position.

An alignment is only made where the pieces fall into the words of the text as written: a
SentencePiece piece that starts a word carries ``▁``, and the pieces must make as many words
as the text has (separated by spaces). Where normalisation changed the words (the textbook's
lower-cased, spaced text), or a source was cut, there is none, and tags are placed by
position.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

WORD_START = "▁"  # SentencePiece's mark of a piece that starts a word


@dataclass(frozen=True)
class WordAlignment:
    """For each word of ``source`` (separated by spaces), the index of the word of ``target``
    that renders it."""

    source: str  # the texts aligned: the alignment holds for these only
    target: str
    words: tuple[int, ...]


def piece_words(pieces: Sequence[str]) -> list[int]:
    """The index of the word each piece belongs to: a piece starting with ``▁`` starts a word;
    where no piece has the mark (a word tokenizer), each piece is a word."""
    if not any(p.startswith(WORD_START) for p in pieces):
        return list(range(len(pieces)))
    words, current = [], -1
    for p in pieces:
        if p.startswith(WORD_START) or current < 0:
            current += 1
        words.append(current)
    return words


def word_alignment(weights: Sequence[Sequence[float]], source_pieces: Sequence[str],
                   target_pieces: Sequence[str], source: str, target: str
                   ) -> WordAlignment | None:
    """The :class:`WordAlignment` of ``source`` and its translation ``target`` from
    ``weights``, a row per target piece (in order; rows after the last, ``<eos>``'s, are not
    read) and a column per source piece (columns after the last, ``<eos>``'s, are not read);
    None where the pieces do not make the words of the texts as written, or a row or column
    is missing."""
    src_words, tgt_words = piece_words(source_pieces), piece_words(target_pieces)
    if not src_words or not tgt_words:
        return None
    if src_words[-1] + 1 != len(source.split()) or tgt_words[-1] + 1 != len(target.split()):
        return None
    if len(weights) < len(target_pieces) or any(
            len(row) < len(source_pieces) for row in weights[:len(target_pieces)]):
        return None
    columns: list[list[int]] = [[] for _ in range(src_words[-1] + 1)]
    for j, w in enumerate(src_words):
        columns[w].append(j)
    rows = weights[:len(target_pieces)]
    aligned = []
    for cols in columns:
        best = max(range(len(rows)), key=lambda t: sum(rows[t][j] for j in cols))
        aligned.append(tgt_words[best])
    return WordAlignment(source, target, tuple(aligned))
