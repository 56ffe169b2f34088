"""Train/valid/test split grouped by (normalised) source sentence.

Every source sentence, with all its translations, lands in exactly one split, so no test
source was seen in training and valid/test keep every reference for multi-reference BLEU.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


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


def grouped_split(
    sources: Sequence[str] | np.ndarray, valid_frac: float, test_frac: float, seed: int,
    valid_size: int = 0, test_size: int = 0,
) -> dict[str, np.ndarray]:
    """Pair indices (ascending, int64) of ``train``, ``valid`` and ``test``: ``*_frac`` of the
    distinct source sentences, at most ``*_size`` of them (0: no cap). ``sources``: each
    pair's source sentence, or a hash of it (:func:`nmt.data.spool.text_hash`).

    The sentences are shuffled with ``seed`` (numpy PCG64): the first groups of the permutation
    go to test, the next to valid, the rest to train. Same input and seed, same split.
    """
    groups, n = first_seen(np.asarray(sources))
    perm = np.random.default_rng(seed).permutation(n)
    n_test, n_valid = n_held_out(n, test_frac, test_size), n_held_out(n, valid_frac, valid_size)
    which = np.zeros(n, dtype=np.int8)  # 0 train, 1 valid, 2 test, per group
    which[perm[:n_test]] = 2
    which[perm[n_test:n_test + n_valid]] = 1
    pair_split = which[groups]
    return {name: np.flatnonzero(pair_split == k) for k, name in
            enumerate(("train", "valid", "test"))}
