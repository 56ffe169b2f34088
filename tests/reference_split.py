"""The grouped split applied to a list of sources in memory: what the tests compare
:func:`nmt.data.split.split_spool`'s split on disk with."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nmt.data.split import SPLITS, first_seen, group_splits


def grouped_split(
    sources: Sequence[str] | np.ndarray, valid_frac: float, test_frac: float, seed: int,
    valid_size: int = 0, test_size: int = 0,
) -> dict[str, np.ndarray]:
    """Pair indices (ascending, int64) of ``train``, ``valid`` and ``test``
    (:func:`group_splits` of the distinct ``sources``). ``sources``: each pair's source
    sentence, or a hash of it (:func:`nmt.data.spool.text_hash`)."""
    groups, n = first_seen(np.asarray(sources))
    pair_split = group_splits(n, valid_frac, test_frac, seed, valid_size, test_size)[groups]
    return {name: np.flatnonzero(pair_split == k) for k, name in enumerate(SPLITS)}
