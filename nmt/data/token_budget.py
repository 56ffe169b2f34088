"""Sentences cut into batches by a token budget, in plain Python (no torch, no numpy): the one
rule by which training batches its pairs (:mod:`nmt.data.batching`, by target tokens) and every
engine groups its sources (:func:`nmt.translation.rules.decode_batches`, by source tokens times
the beam)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:  # numpy is not imported here: the CTranslate2 command starts without it
    import numpy as np

Order = TypeVar("Order", list[int], "np.ndarray")  # sentence indices, cut into batches by slicing


def token_batches(
    order: Order, lengths: Sequence[int], budget: int, max_size: int = 0
) -> list[Order]:
    """Cut ``order`` (sorted by ``lengths``, ascending or descending) greedily into batches that
    grow while ``size * longest <= budget`` and, with ``max_size``, ``size <= max_size``; a
    sentence longer than the budget goes alone. One pass over sentences, not tokens."""
    out, start, longest = [], 0, 0
    for i, length in enumerate(lengths):
        grown = max(longest, length)
        if i > start and ((i - start + 1) * grown > budget or 0 < max_size <= i - start):
            out.append(order[start:i])
            start, grown = i, length
        longest = grown
    if start < len(order):
        out.append(order[start:])
    return out
