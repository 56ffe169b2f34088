"""The rules of search every engine follows, in plain Python (no torch): which sentences are
decoded together (cut by a token budget, as training batches are:
:func:`nmt.data.token_budget.token_batches`), and
GNMT's length penalty. :mod:`nmt.translation.search` (PyTorch) and
:mod:`nmt.export.ct2_translate` (CTranslate2) both use them, so the two engines batch and rank
alike.
"""

from __future__ import annotations

from collections.abc import Sequence

from nmt.config import DecodeConfig
from nmt.data.token_budget import token_batches


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
