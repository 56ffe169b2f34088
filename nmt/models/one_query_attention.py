"""A speed trick, fenced here: attention for a single query on the CPU in bf16, as element-wise
products and sums instead of torch's fused kernel.

A decoder step of a search attends from one new position. On the CPU, with bf16 inputs,
``F.scaled_dot_product_attention`` runs its flash kernel, which converts blocks of the inputs to
float and back for every call: at one query and a few dozen keys that costs more than the
attention itself (a quarter of a bf16 greedy search's time in a profile). The same formula, the
query times each key summed over the head's dimensions, then the weights times the values
summed over the keys, is a few element-wise passes over the cached keys and values.

Used for bf16 only: in fp32 the fused kernel was as fast or faster, and written as matrix
products the same attention was slower (the figures, on the ``make demo`` model:
docs/BENCHMARKS.md, "Decoding the test split").
``tests/test_one_query_attention.py`` compares it with the fused kernel and with the formula in
float64.
"""

from __future__ import annotations

import torch
from torch import Tensor


def applies(q: Tensor, dropout_p: float) -> bool:
    """Whether this path is taken: one query, on the CPU, in bf16, without dropout."""
    return (q.shape[-2] == 1 and q.dtype == torch.bfloat16 and q.device.type == "cpu"
            and dropout_p == 0.0)


def scores(q: Tensor, k: Tensor) -> Tensor:
    """``Q K^T / sqrt(d)`` for one query: q ``(..., 1, d)``, k ``(..., K, d)`` ->
    ``(..., 1, K)``."""
    return (q * k).sum(-1).unsqueeze(-2) * q.shape[-1] ** -0.5


def weigh(weights: Tensor, v: Tensor) -> Tensor:
    """``weights V`` for one query: weights ``(..., 1, K)``, v ``(..., K, d_v)`` ->
    ``(..., 1, d_v)``."""
    return (weights.transpose(-2, -1) * v).sum(-2, keepdim=True)
