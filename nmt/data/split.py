"""Train/valid/test split grouped by (normalised) source sentence.

Every source sentence, with all its translations, lands in exactly one split, so no test
source was seen in training and valid/test keep every reference for multi-reference BLEU.

The rule is :func:`group_splits`: the distinct sources, numbered in the order each is first
seen, are shuffled with the seed, and the first of the permutation go to test, the next to
valid. :func:`split_spool` applies it to the pairs of a :class:`nmt.data.spool.PairSpool` on
disk, a bucket of hashes at a time, in memory of a byte a pair (while it is drawn) and five a
distinct source (the tests check it against the same rule applied to a list of sources in
memory, tests/reference_split.py).

A training split can also leave out given sources (:class:`HeldOutSources`, a continued model's
parent's valid and test sources): :func:`hold_out_of_training` takes the training pairs whose
source is one of them out of every split, after the split is drawn, so the held-out splits stay
those of the same data without them; the pairs of a back-translated source
(:func:`hold_back_translated_out`) all go to the training split.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from nmt.data import hash_buckets
from nmt.data.hash_buckets import HashBuckets, first_of_each
from nmt.data.spool import NONE, SPLIT_CODES, PairSpool, text_hash

SPLITS = ("train", "valid", "test")  # what group_splits' codes 0, 1, 2 stand for


def first_seen(keys: np.ndarray) -> tuple[np.ndarray, int]:
    """``(n,)`` int64 ids of ``keys``, equal keys alike, numbered in the order each key is
    first seen (``["b", "a", "b"]`` -> ``[0, 1, 0]``), and how many distinct keys there are."""
    if not len(keys):
        return np.zeros(0, np.int64), 0
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    rank = np.empty(len(first), np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    return rank[inverse.reshape(-1)], len(first)


def n_held_out(n_groups: int, frac: float, cap: int = 0) -> int:
    """Groups for a held-out split: ``round(frac * n)``, at most ``cap`` (0: no cap), at least 1
    when ``frac > 0`` (so a small corpus still validates), and never so many that training is
    left empty."""
    if frac <= 0 or n_groups < 3:
        return 0
    wanted = round(frac * n_groups)
    if cap:
        wanted = min(wanted, cap)
    return min(max(1, wanted), (n_groups - 1) // 2)


def group_splits(n: int, valid_frac: float, test_frac: float, seed: int, valid_size: int = 0,
                 test_size: int = 0) -> np.ndarray:
    """The split of each of ``n`` groups numbered as first seen (uint8: 0 train, 1 valid, 2
    test): ``*_frac`` of them, at most ``*_size`` (0: no cap). The groups are shuffled with
    ``seed`` (numpy PCG64): the first of the permutation go to test, the next to valid. Same
    ``n`` and seed, same split."""
    # what rng.permutation(n) gives, in 4 bytes a group instead of 8 (the shuffle is the same)
    perm = np.arange(n, dtype=np.int32 if n < 2**31 else np.int64)
    np.random.default_rng(seed).shuffle(perm)
    n_test, n_valid = n_held_out(n, test_frac, test_size), n_held_out(n, valid_frac, valid_size)
    which = np.zeros(n, dtype=np.uint8)
    which[perm[:n_test]] = 2
    which[perm[n_test:n_test + n_valid]] = 1
    return which


def split_spool(spool: PairSpool, valid_frac: float, test_frac: float, seed: int,
                valid_size: int = 0, test_size: int = 0) -> None:
    """:func:`group_splits` of the pairs of ``spool`` that are not duplicates, by the hashes of
    their sources, written into ``spool.split`` (:data:`nmt.data.spool.SPLIT_CODES`). Equal
    sources are found a bucket at a time on disk (:class:`nmt.data.hash_buckets.HashBuckets`):
    the first pair of each is marked, the marks counted in order number the groups as first
    seen, and each pair then takes the split of the first pair of its group."""
    split = spool.split
    first_of_group = np.zeros(len(spool), bool)
    with HashBuckets(spool.path.with_name(spool.path.name + ".groups"), len(spool)) as buckets:
        buckets.add_column(spool.source_hashes, spool.kept)
        n = 0
        for hashes, indices in buckets.buckets():
            first, _ = first_of_each(hashes)
            first_of_group[indices[first]] = True
            n += len(first)
        codes = group_splits(n, valid_frac, test_frac, seed, valid_size, test_size) + 1
        numbered = 0  # groups numbered so far, in the order of their first pairs
        for at in range(0, len(split), hash_buckets.CHUNK):
            firsts = at + np.flatnonzero(first_of_group[at:at + hash_buckets.CHUNK])
            split[firsts] = codes[numbered:numbered + len(firsts)]
            numbered += len(firsts)
        for hashes, indices in buckets.buckets():
            first, inverse = first_of_each(hashes)
            split[indices] = split[indices[first]][inverse]


@dataclass(frozen=True)
class HeldOutSources:
    """Normalised source sentences a training split leaves out, as the hashes the grouped split
    matches sources by (:func:`nmt.data.spool.text_hash`), sorted and distinct; ``what`` says
    where they come from ("the parent's valid or test split"), for messages only."""

    hashes: np.ndarray  # int64, sorted, distinct
    what: str

    @classmethod
    def of(cls, sources: Iterable[str], what: str) -> HeldOutSources:
        hashes = np.fromiter((text_hash(s) for s in sources), np.int64)
        return cls(np.unique(hashes), what)

    def __len__(self) -> int:
        return len(self.hashes)

    def union(self, other: HeldOutSources, what: str) -> HeldOutSources:
        """These sources and ``other``'s, said as ``what``."""
        return HeldOutSources(np.union1d(self.hashes, other.hashes), what)

    def digest(self) -> str:
        """SHA-256 of the hashes: what a cache's key holds of them."""
        return hashlib.sha256(self.hashes.astype("<i8").tobytes()).hexdigest()

    def to_text(self) -> str:
        """``# what``, then one hash a line, 16 hex digits (unsigned): as a run records them."""
        hashes = self.hashes.astype(np.int64).view(np.uint64)
        return f"# {self.what}\n" + "".join(f"{h:016x}\n" for h in hashes)

    @classmethod
    def from_text(cls, text: str) -> HeldOutSources:
        """What :meth:`to_text` wrote (a ``ValueError`` for anything else)."""
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()
        if not lines or not lines[0].startswith("# ") or not all(
                re.fullmatch("[0-9a-f]{16}", line) for line in lines[1:]):
            raise ValueError("expected a line '# WHERE FROM', then one hash of 16 hex digits "
                             "a line")
        values = np.array([int(line, 16) for line in lines[1:]], np.uint64)
        return cls(np.unique(values.view(np.int64)), lines[0][2:])


def hold_out_of_training(spool: PairSpool, held: HeldOutSources) -> int:
    """The training pairs of ``spool`` whose source is one of ``held``, taken out of every split
    (their split set to none), a chunk of source hashes at a time; returns how many."""
    split, moved = spool.split, 0
    for at, hashes in spool.source_hashes.chunks():
        out = np.flatnonzero(spool.kept(at, at + len(hashes), "train")
                             & np.isin(hashes, held.hashes))
        split[at + out] = NONE
        moved += len(out)
    return moved


def hold_back_translated_out(spool: PairSpool, ranges: Sequence[tuple[int, int]]) -> int:
    """The pairs of back-translated sources (``back_translated = true``; ``ranges`` of the spool
    hold them) moved from valid and test to train: their sources are synthetic. In training
    their sources are marked with :data:`nmt.data.tokenizers.BT_TAG`, so the model tells them
    from real ones and translation (untagged input) reads like the real data. Returns how many
    pairs (not duplicates) they hold."""
    split, held = spool.split, 0
    for first, end in ranges:
        for at in range(first, end, hash_buckets.CHUNK):
            kept = at + np.flatnonzero(spool.kept(at, min(at + hash_buckets.CHUNK, end)))
            split[kept] = SPLIT_CODES["train"]
            held += len(kept)
    return held
