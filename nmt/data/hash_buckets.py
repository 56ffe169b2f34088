"""Equal hashes found a bucket at a time on disk, so that memory does not grow with how many
hashes there are.

Finding the first of equal pairs (duplicates) or of equal sources (the split's groups) in a
whole corpus at once means sorting every pair's hash in memory: tens of bytes a pair with the
sort's temporaries. A :class:`HashBuckets` spreads (hash, index) records over files on disk by
the top bits of the hash, so that all the records of one hash land in one bucket, in the order
they were added. Each bucket is then read back and sorted alone: memory for
:data:`BUCKET_RECORDS` records (16 MB of them), whatever the corpus.

:class:`Column` is the other half: 64-bit values (a hash or an offset a pair) appended to a file
as pairs come and read back a chunk at a time.
"""

from __future__ import annotations

import shutil
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType

import numpy as np

BUCKET_RECORDS = 1 << 20  # records a bucket is sized for (16 bytes each)
MAX_BITS = 8  # at most 256 bucket files open at once (beyond 268 M records, buckets grow)
CHUNK = 1 << 20  # values read from a column at a time

RECORD = np.dtype([("hash", "<i8"), ("index", "<i8")])


class Column:
    """64-bit signed values appended to ``path`` one at a time, read back a slice at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = path.open("w+b")
        self._buffer = array("q")
        self._written = 0

    def __len__(self) -> int:
        return self._written + len(self._buffer)

    def append(self, value: int) -> None:
        self._buffer.append(value)
        if len(self._buffer) >= 65536:
            self.flush()

    def flush(self) -> None:
        if self._buffer:
            self._file.seek(0, 2)
            self._file.write(self._buffer.tobytes())
            self._written += len(self._buffer)
            self._buffer = array("q")
        self._file.flush()

    def read(self, start: int, stop: int) -> np.ndarray:
        """The values from ``start`` to ``stop`` (int64)."""
        self.flush()
        stop = min(stop, self._written)
        if stop <= start:
            return np.zeros(0, np.int64)
        self._file.seek(8 * start)
        return np.frombuffer(self._file.read(8 * (stop - start)), "<i8").astype(np.int64)

    def chunks(self) -> Iterator[tuple[int, np.ndarray]]:
        """``(start, values)`` for every :data:`CHUNK` values, in order."""
        size = CHUNK
        for start in range(0, len(self), size):
            yield start, self.read(start, start + size)

    def close(self) -> None:
        self._file.close()


class HashBuckets:
    """(hash, index) records spread over bucket files in ``directory`` by the hash's top bits:
    enough buckets (a power of two) that ``expected`` records make at most about
    ``bucket_records`` (by default :data:`BUCKET_RECORDS`) a bucket. Read back
    a bucket at a time (:meth:`buckets`, as often as needed); the directory is removed on
    :meth:`close` (or at the end of a ``with`` block)."""

    def __init__(self, directory: Path, expected: int, bucket_records: int = 0) -> None:
        bucket_records = bucket_records or BUCKET_RECORDS
        self.bits = min(((max(expected, 1) - 1) // bucket_records).bit_length(), MAX_BITS)
        self.directory = directory
        directory.mkdir(parents=True)
        self._files = [(directory / f"{k}.bin").open("w+b") for k in range(1 << self.bits)]

    def add(self, hashes: np.ndarray, indices: np.ndarray) -> None:
        """Records of ``hashes`` (int64) with their ``indices``, in this order."""
        records = np.empty(len(hashes), RECORD)
        records["hash"], records["index"] = hashes, indices
        if not self.bits:
            self._files[0].write(records.tobytes())
            return
        bucket = (hashes.view(np.uint64) >> np.uint64(64 - self.bits)).astype(np.intp)
        order = np.argsort(bucket, kind="stable")  # a bucket's records stay in their order
        records, bucket = records[order], bucket[order]
        bounds = np.searchsorted(bucket, np.arange(len(self._files) + 1))
        for k, f in enumerate(self._files):
            if bounds[k] < bounds[k + 1]:
                f.write(records[bounds[k]:bounds[k + 1]].tobytes())

    def add_column(self, column: Column,
                   keep: Callable[[int, int], np.ndarray] | None = None) -> None:
        """Records of the values of ``column``, each with its index; with ``keep``, only those
        that ``keep(start, stop)`` marks among the values from ``start`` to ``stop``."""
        for at, hashes in column.chunks():
            indices = np.arange(at, at + len(hashes))
            if keep is None:
                self.add(hashes, indices)
            else:
                kept = keep(at, at + len(hashes))
                self.add(hashes[kept], indices[kept])

    def buckets(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(hashes, indices)`` of each bucket in turn, in the order they were added: equal
        hashes are always in the same bucket."""
        for f in self._files:
            f.flush()
            f.seek(0)
            records = np.frombuffer(f.read(), RECORD)
            yield records["hash"], records["index"]

    def close(self) -> None:
        for f in self._files:
            f.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> HashBuckets:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def first_of_each(hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each distinct hash of a bucket first occurs (ascending by hash), and, for every
    record, which of those distinct hashes it holds."""
    _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)
