"""The rules of search every engine follows, in plain Python (no torch): which sentences are
decoded together (cut by a token budget, as training batches are: :func:`token_batches`), and
GNMT's length penalty. :mod:`nmt.translation.search` (PyTorch) and
:mod:`nmt.export.ct2_translate` (CTranslate2) both use them, so the two engines batch and rank
alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from nmt.config import DecodeConfig

if TYPE_CHECKING:  # numpy is not imported here: the CTranslate2 command starts without it
    import numpy as np

Order = TypeVar("Order", list[int], "np.ndarray")  # sentence indices, cut into batches by slicing


def length_penalty(length: int, alpha: float) -> float:
    """GNMT (Wu et al. 2016, eq. 14): ``((5 + |Y|) / 6) ** alpha``; 1 when ``alpha = 0``."""
    return ((5.0 + length) / 6.0) ** alpha


def decode_batches(lengths: Sequence[int], cfg: DecodeConfig) -> list[list[int]]:
    """Which sources are decoded together: the indices of the non-empty ones (``lengths`` are
    their token counts), longest first, cut into batches of at most ``cfg.batch_size``
    sentences whose padded source tokens times ``cfg.beam`` (the rows beam search keeps per
    sentence) stay within ``cfg.max_tokens``; a sentence over that goes alone. What a batch
    holds in memory is then bounded by the batch, not by the longest line or the beam. The
    CTranslate2 engine batches with it too."""
    order = sorted((i for i in range(len(lengths)) if lengths[i]), key=lambda i: -lengths[i])
    costs = [lengths[i] * cfg.beam for i in order]
    return token_batches(order, costs, cfg.max_tokens, cfg.batch_size)


def token_batches(
    order: Order, lengths: Sequence[int], budget: int, max_size: int = 0
) -> list[Order]:
    """Cut ``order`` (sorted by ``lengths``, ascending or descending) greedily into batches that
    grow while ``size * longest <= budget`` and, with ``max_size``, ``size <= max_size``; a
    sentence longer than the budget goes alone. One pass over sentences, not tokens. Training
    batches by target tokens with it, decoding (:func:`decode_batches`) by source
    tokens times the beam."""
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
