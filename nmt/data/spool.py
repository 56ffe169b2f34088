"""Cleaned pairs kept on disk while a cache is built, so that preparing a corpus holds a few
bytes a pair in memory, not its text.

A :class:`PairSpool` appends each pair as it is cleaned (source, target and reference, three
lines of a work file) and keeps, per pair, where it begins and two 64-bit hashes: of the pair,
for duplicates, and of its source, for the split grouped by source. Duplicates are found from
the hashes (:meth:`PairSpool.mark_duplicates`: the first of equal pairs stays); the pairs are
read back by index, in any order, when the splits are written.

A hash stands for its text: two different pairs with the same 64-bit hash would be taken for
duplicates (at ten million pairs, a chance of about one in three hundred thousand).
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np


def text_hash(*texts: str) -> int:
    """A 64-bit signed hash of ``texts`` (BLAKE2b), the same in every process and run."""
    h = hashlib.blake2b(digest_size=8)
    for text in texts:
        h.update(text.encode("utf-8"))
        h.update(b"\n")  # ("ab", "c") and ("a", "bc") differ
    return int.from_bytes(h.digest(), "little", signed=True)


class PairSpool:
    """Pairs appended to ``path`` (three lines each: source, target, reference; none holds a
    line end, as corpus lines are split at them), read back by index."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._out = path.open("wb")
        self._end = 0
        self._starts = array("q")  # where each pair begins in the file
        self._pair_hashes = array("q")
        self._source_hashes = array("q")
        self._duplicate = bytearray()  # 1: an earlier pair is the same (mark_duplicates)

    def __len__(self) -> int:
        return len(self._starts)

    def add(self, src: str, tgt: str, ref: str) -> None:
        blob = f"{src}\n{tgt}\n{ref}\n".encode()
        self._out.write(blob)
        self._starts.append(self._end)
        self._end += len(blob)
        self._pair_hashes.append(text_hash(src, tgt))
        self._source_hashes.append(text_hash(src))
        self._duplicate.append(0)

    def mark_duplicates(self, start: int = 0) -> int:
        """Mark the pairs from ``start`` on that equal an earlier pair (of any part); returns
        how many were marked."""
        hashes = self.pair_hashes()
        _, first = np.unique(hashes, return_index=True)
        repeated = np.ones(len(hashes), bool)
        repeated[first] = False
        repeated[:start] = False
        marked = np.frombuffer(self._duplicate, np.uint8)
        marked[repeated] = 1
        return int(repeated.sum())

    def kept(self) -> np.ndarray:
        """Indices of the pairs not marked as duplicates, ascending."""
        return np.flatnonzero(np.frombuffer(self._duplicate, np.uint8) == 0)

    def pair_hashes(self) -> np.ndarray:
        return np.frombuffer(self._pair_hashes, np.int64)

    def source_hashes(self) -> np.ndarray:
        return np.frombuffer(self._source_hashes, np.int64)

    def read(self, indices: Iterable[int]) -> Iterator[tuple[str, str, str]]:
        """The pairs at ``indices`` (any order; ascending runs are read without seeking)."""
        self._out.flush()
        with self.path.open("rb") as f:
            at = -1
            for i in indices:
                start = self._starts[i]
                if start != at:
                    f.seek(start)
                s, t, r = (f.readline()[:-1].decode("utf-8") for _ in range(3))
                at = self._starts[i + 1] if i + 1 < len(self._starts) else self._end
                yield s, t, r

    def close(self) -> None:
        self._out.close()
