"""py3langid's classifier over many sentences at once: numpy over the batch, not Python over
each sentence's bytes.

py3langid (:mod:`nmt.data.langid`'s model) classifies one text at a time: it walks the text's
UTF-8 bytes through a finite automaton in a Python loop, counts the features the states it
visits emit, and scores the counts with its naive Bayes tables. That loop was the largest part
of preparing a corpus: 22 of 57 seconds for the built-in corpus in one process
(docs/BENCHMARKS.md, "Data preparation").

:func:`classify_many` computes the same for a batch: the texts, sorted longest first, are bytes
in the rows of one matrix, and each step of the loop moves every row that still has a byte
through the automaton at once. The features' counts, the scores (``log1p(count)`` times the
table, plus the prior), the length temperature, the softmax and the folding of aliased labels
are py3langid's, in float32 as it computes them, summed in another order: the same language,
and its probability within float32's rounding (tests/test_data_langid.py compares the two on
the sides of a corpus and on generated text).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


class BatchClassifier:
    """An identifier's tables, as arrays, for :meth:`classify_many`; the text's encoding and
    the aliased labels are the identifier's own."""

    def __init__(self, identifier: Any) -> None:
        self.encode = identifier._encode  # lower case when all in capitals, NFC, UTF-8
        self.labels: list[str] = list(identifier.nb_classes)
        self.nextmove = np.asarray(identifier.tk_nextmove)  # a view of its 39 MB, not a copy
        self.rowbase = np.asarray(identifier.tk_row, dtype=np.int64) << 8
        self.output = np.asarray(identifier.tk_output, dtype=np.int32)
        self.ptc = np.asarray(identifier.nb_ptc, dtype=np.float32)
        self.pc = np.asarray(identifier.nb_pc, dtype=np.float32)
        self.n_features = len(self.ptc)
        self.aliases = list(identifier._alias_pairs)  # (first column, its duplicate) of a label

    def classify_many(self, texts: Sequence[str]) -> list[tuple[str, float]]:
        """``(language, probability)`` of each text, as py3langid's ``classify`` gives them
        (with ``norm_probs``)."""
        if not texts:
            return []
        raw = [self.encode(t) for t in texts]
        lengths = np.fromiter(map(len, raw), dtype=np.int64, count=len(raw))
        order = np.argsort(-lengths, kind="stable")  # longest first: live rows are a prefix
        lengths = lengths[order]
        n, width = len(raw), int(lengths[0])
        columns = np.zeros((max(width, 1), n), dtype=np.int32)  # byte t of every row: a row
        flat = np.frombuffer(b"".join(raw[i] for i in order.tolist()), dtype=np.uint8)
        row_of = np.repeat(np.arange(n), lengths)
        starts = np.cumsum(lengths) - lengths
        columns[np.arange(len(flat)) - np.repeat(starts, lengths), row_of] = flat
        live = np.searchsorted(-lengths, -np.arange(width), side="right")  # rows longer than t
        state = np.zeros(n, dtype=self.nextmove.dtype)
        emitted: list[np.ndarray] = []  # row * n_features + feature, for each feature emitted
        for t in range(width):
            k = int(live[t])
            moved = self.nextmove[self.rowbase[state[:k]] + columns[t, :k]]
            state[:k] = moved
            feature = self.output[moved]
            hit = np.flatnonzero(feature >= 0)
            emitted.append(hit * self.n_features + feature[hit])
        scores = np.zeros((n, len(self.labels)), dtype=np.float32)
        keys, counts = np.unique(np.concatenate(emitted) if emitted else np.zeros(0, np.int64),
                                 return_counts=True)
        if len(keys):
            row, feature = np.divmod(keys, self.n_features)
            weighted = np.take(self.ptc, feature, axis=0)
            weighted *= np.log1p(counts).astype(np.float32)[:, None]
            first = np.flatnonzero(np.r_[True, row[1:] != row[:-1]])
            scores[row[first]] = np.add.reduceat(weighted, first, axis=0) + self.pc
        # rows with no feature keep 0.0 everywhere: a uniform distribution, as in py3langid
        scores /= np.sqrt(np.maximum(lengths, 1))[:, None]  # its length temperature
        scores = np.exp(scores - scores.max(axis=1, keepdims=True))
        scores /= scores.sum(axis=1, keepdims=True)
        for i, j in self.aliases:
            scores[:, i] += scores[:, j]
            scores[:, j] = 0.0
        best = scores.argmax(axis=1)
        probability = scores[np.arange(n), best]
        results: list[tuple[str, float]] = [("", 0.0)] * n
        for r, i in enumerate(order.tolist()):
            results[i] = (self.labels[int(best[r])], float(probability[r]))
        return results
