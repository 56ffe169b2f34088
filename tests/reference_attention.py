"""The textbook's attention functions written with valid lengths, as the recipe calls them: the
tests check the package's masks against them (the package itself works with boolean masks)."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from nmt.models.attention import dot_product_attention, masked_fill_min, valid_lens_to_mask


def masked_softmax(scores: Tensor, valid_lens: Tensor | None) -> Tensor:
    """Softmax over the last axis of ``scores`` ``(B, Q, K)`` ignoring keys past each valid length.

    ``valid_lens`` is ``(B,)`` (one length per batch row) or ``(B, Q)`` (one per query), or None
    for a plain softmax. A valid length of 0 masks every key; all scores are then equal and the
    weights come out uniform, as in the recipe.
    """
    if valid_lens is None:
        return F.softmax(scores, dim=-1)
    mask = valid_lens_to_mask(valid_lens, scores.shape[-1])
    return F.softmax(masked_fill_min(scores, mask), dim=-1)


class DotProductAttention(nn.Module):
    """The recipe's scaled dot-product module: ``(B, Q, d)`` queries with valid lengths."""

    def __init__(self, dropout: float = 0.0) -> None:
        super().__init__()
        self.dropout = dropout

    def forward(
        self,
        queries: Tensor,
        keys: Tensor,
        values: Tensor,
        valid_lens: Tensor | None = None,
        need_weights: bool = True,
    ) -> tuple[Tensor, Tensor | None]:
        """Output ``(B, Q, d_v)`` and weights ``(B, Q, K)`` (None unless ``need_weights``)."""
        mask = None if valid_lens is None else valid_lens_to_mask(valid_lens, keys.shape[1])
        p = self.dropout if self.training else 0.0
        return dot_product_attention(
            queries, keys, values, mask, dropout_p=p, need_weights=need_weights
        )
