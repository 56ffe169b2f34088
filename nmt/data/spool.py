"""Cleaned pairs kept on disk while a cache is built, so that preparing a corpus holds two
bytes a pair in memory, not its text or its hashes.

A :class:`PairSpool` appends each pair as it is cleaned (source, target and reference, three
lines of a work file) and, beside it, two 64-bit hashes a pair in column files
(:class:`nmt.data.hash_buckets.Column`): of the pair, for duplicates, and of its source, for
the split grouped by source. In memory it keeps two plain arrays, a byte a pair each: whether
the pair is a duplicate (:attr:`PairSpool.duplicate`) and its split (:attr:`PairSpool.split`,
:data:`SPLIT_CODES`), and where every :data:`MARK_EVERY`-th pair begins in the file. Duplicates
are found from the hashes a bucket at a time (:meth:`PairSpool.mark_duplicates`: the first of
equal pairs stays); the pairs are read back by index, in ascending runs, when the splits are
written. At ten million pairs the two arrays take 20 MB (one byte packing both would take 10
MB: docs/DATA.md).

A hash stands for its text: two different pairs with the same 64-bit hash would be taken for
duplicates (at ten million pairs, a chance of about one in three hundred thousand).
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from nmt.data.hash_buckets import Column, HashBuckets, first_of_each


def text_hash(*texts: str) -> int:
    """A 64-bit signed hash of ``texts`` (BLAKE2b), the same in every process and run."""
    h = hashlib.blake2b(digest_size=8)
    for text in texts:
        h.update(text.encode("utf-8"))
        h.update(b"\n")  # ("ab", "c") and ("a", "bc") differ
    return int.from_bytes(h.digest(), "little", signed=True)


# A pair's split, in PairSpool.split (nmt.data.split.split_spool draws it): NONE until it is
# drawn, and for a duplicate or a training pair left out (nmt.data.split.hold_out_of_training)
NONE = 0
SPLIT_CODES = {"train": 1, "valid": 2, "test": 3}

INDEX_CHUNK = 1 << 16  # indices a chunk (PairSpool.indices)
MARK_EVERY = 64  # where every 64th pair begins is kept: a read seeks there, then skips lines


class PairSpool:
    """Pairs appended to ``path`` (three lines each: source, target, reference; none holds a
    line end, as corpus lines are split at them), their hashes beside it (``path.pairs``,
    ``path.sources``), read back by index."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._out = path.open("wb")
        self._end = 0
        self._marks = array("q")  # where pairs 0, MARK_EVERY, 2 MARK_EVERY ... begin
        self.pair_hashes = Column(path.with_name(path.name + ".pairs"))
        self.source_hashes = Column(path.with_name(path.name + ".sources"))
        self._duplicate = bytearray()  # grown a pair at a time, read as numpy arrays
        self._split = bytearray()

    def __len__(self) -> int:
        return len(self._split)

    def add(self, src: str, tgt: str, ref: str) -> None:
        blob = f"{src}\n{tgt}\n{ref}\n".encode()
        if not len(self) % MARK_EVERY:
            self._marks.append(self._end)
        self._out.write(blob)
        self._end += len(blob)
        self.pair_hashes.append(text_hash(src, tgt))
        self.source_hashes.append(text_hash(src))
        self._duplicate.append(0)
        self._split.append(NONE)

    @property
    def duplicate(self) -> np.ndarray:
        """Whether each pair equals an earlier one (bool), writable; let it go before adding
        pairs."""
        return np.frombuffer(self._duplicate, np.bool_)

    @property
    def split(self) -> np.ndarray:
        """Each pair's split (uint8, :data:`SPLIT_CODES`, or :data:`NONE`), writable; let it go
        before adding pairs."""
        return np.frombuffer(self._split, np.uint8)

    def kept(self, start: int, stop: int, split: str | None = None) -> np.ndarray:
        """Which of the pairs from ``start`` to ``stop`` are not duplicates and, if ``split`` is
        named, in that split."""
        if split is None:
            return ~self.duplicate[start:stop]
        return self.split[start:stop] == SPLIT_CODES[split]

    def mark_duplicates(self, start: int = 0) -> int:
        """Mark the pairs from ``start`` on that equal an earlier pair (of any part); returns
        how many were marked."""
        duplicate, marked = self.duplicate, 0
        with HashBuckets(self.path.with_name(self.path.name + ".buckets"), len(self)) as buckets:
            buckets.add_column(self.pair_hashes)
            for hashes, indices in buckets.buckets():
                first, _ = first_of_each(hashes)
                repeated = np.ones(len(indices), bool)
                repeated[first] = False
                later = indices[repeated & (indices >= start)]
                duplicate[later] = True
                marked += len(later)
        return marked

    def indices(self, split: str | None = None, start: int = 0,
                stop: int | None = None) -> Iterator[np.ndarray]:
        """Ascending indices, a chunk at a time, of the pairs from ``start`` to ``stop`` that
        are not duplicates and, if ``split`` is named, in that split."""
        stop = len(self) if stop is None else stop
        for at in range(start, stop, INDEX_CHUNK):
            found = np.flatnonzero(self.kept(at, min(at + INDEX_CHUNK, stop), split))
            if len(found):
                yield found + at

    def read(self, indices: Iterable[int]) -> Iterator[tuple[str, str, str]]:
        """The pairs at ``indices`` (ascending runs are read without seeking back)."""
        self._out.flush()
        with self.path.open("rb") as f:
            at = -1  # the pair the file is at
            for i in indices:
                mark = i - i % MARK_EVERY
                if at < 0 or i < at or at < mark:
                    f.seek(self._marks[i // MARK_EVERY])
                    at = mark
                for _ in range(3 * (i - at)):
                    f.readline()
                s, t, r = (f.readline()[:-1].decode("utf-8") for _ in range(3))
                at = i + 1
                yield s, t, r

    def close(self) -> None:
        self._out.close()
        self.pair_hashes.close()
        self.source_hashes.close()
