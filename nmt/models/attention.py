"""Attention components, as in the textbook: additive (Bahdanau) attention, scaled dot-product
attention and multi-head attention (the textbook's masked softmax is a masked fill followed by
``F.softmax``; tests/reference_attention.py keeps its form with valid lengths).

Masks are boolean and True where a key may be attended (the convention of
``torch.nn.functional.scaled_dot_product_attention``). Masked scores are filled with the dtype's
most negative finite value rather than the recipe's -1e6, which overflows in fp16.

Modules return their weights instead of keeping them as attributes, so one module can serve
several batches (or a training step and a picture) without hidden per-batch state.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from nmt.models import one_query_attention

# The fused kernels scaled dot-product attention may use on a GPU. Not cuDNN's, which PyTorch
# prefers on Hopper GPUs: it builds an execution plan for every new shape of its inputs, and
# batches of sentences keep coming in new shapes (batch size x length), so on an H100 the plans'
# host time was 70% of a Transformer's training step (bench.profile_step). The flash and
# memory-efficient kernels need no plan.
PLAN_FREE_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def valid_lens_to_mask(valid_lens: Tensor, n_keys: int) -> Tensor:
    """``(B,)`` or ``(B, Q)`` valid lengths -> bool mask ``(B, 1, K)`` or ``(B, Q, K)``."""
    keys = torch.arange(n_keys, device=valid_lens.device)
    if valid_lens.dim() == 1:
        return keys[None, None, :] < valid_lens[:, None, None]
    return keys[None, None, :] < valid_lens[:, :, None]


def masked_fill_min(scores: Tensor, mask: Tensor | None) -> Tensor:
    """Fill scores where ``mask`` is False with the most negative finite value of their dtype."""
    if mask is None:
        return scores
    return scores.masked_fill(~mask, torch.finfo(scores.dtype).min)


class AdditiveAttention(nn.Module):
    """Bahdanau attention: ``score(q, k) = w_v^T tanh(W_q q + W_k k)``, no biases.

    The decoder calls it once per target step with the same keys, so the key projection is a
    separate method (:meth:`project_keys`, once per batch) and :meth:`attend` takes projected keys.
    """

    def __init__(self, key_size: int, query_size: int, hidden: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.W_k = nn.Linear(key_size, hidden, bias=False)
        self.W_q = nn.Linear(query_size, hidden, bias=False)
        self.w_v = nn.Linear(hidden, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def project_keys(self, keys: Tensor) -> Tensor:
        """``(B, K, key_size)`` -> ``(B, K, hidden)``."""
        return self.W_k(keys)

    def attend(
        self, queries: Tensor, projected_keys: Tensor, values: Tensor, mask: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        """Context ``(B, Q, value_size)`` and weights ``(B, Q, K)`` (taken before dropout).

        queries ``(B, Q, query_size)``, projected_keys ``(B, K, hidden)``, values
        ``(B, K, value_size)``, mask bool ``(B, 1 or Q, K)`` True at keys to attend, or None.
        """
        features = torch.tanh(self.W_q(queries).unsqueeze(2) + projected_keys.unsqueeze(1))
        scores = self.w_v(features).squeeze(-1)  # (B, Q, K)
        weights = F.softmax(masked_fill_min(scores, mask), dim=-1)
        return torch.bmm(self.dropout(weights), values), weights

    def forward(
        self, queries: Tensor, keys: Tensor, values: Tensor, valid_lens: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """The recipe's call: keys ``(B, K, key_size)``, valid_lens ``(B,)`` or ``(B, Q)``."""
        mask = None if valid_lens is None else valid_lens_to_mask(valid_lens, keys.shape[1])
        return self.attend(queries, self.project_keys(keys), values, mask)


def causal_mask(n_queries: int, n_keys: int, device: torch.device | None = None) -> Tensor:
    """``(Q, K)`` bool, True where query i may see key j: ``j <= i + K - Q`` (the last Q of K
    positions are the queries, so it also serves new positions after a cache)."""
    rows = torch.arange(n_queries, device=device)[:, None] + (n_keys - n_queries)
    return torch.arange(n_keys, device=device)[None, :] <= rows


def dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    *,
    dropout_p: float = 0.0,
    need_weights: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Scaled dot-product attention ``softmax(Q K^T / sqrt(d)) V`` over the last two axes.

    q ``(..., Q, d)``, k ``(..., K, d)``, v ``(..., K, d_v)``; mask bool broadcastable to
    ``(..., Q, K)``, True at keys to attend (see :func:`causal_mask`), or None. Returns
    ``(..., Q, d_v)`` and, with ``need_weights``, the weights ``(..., Q, K)`` taken before
    dropout (else None).

    With ``need_weights`` the formula is computed as written; otherwise by
    ``F.scaled_dot_product_attention``, the same computation in one fused kernel that does not
    return the weights, or, for a search step's single query on the CPU in bf16, by
    :mod:`nmt.models.one_query_attention`. (A row with every key masked gives uniform weights
    on the first path and may give zeros on the fused one; it does not occur, as every source
    holds ``<eos>``.)
    """
    if not need_weights and one_query_attention.applies(q, dropout_p):
        weights = F.softmax(masked_fill_min(one_query_attention.scores(q, k), mask), dim=-1)
        return one_query_attention.weigh(weights, v), None
    if not need_weights:
        with sdpa_kernel(PLAN_FREE_BACKENDS) if q.is_cuda else nullcontext():
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        return out, None
    scores = torch.matmul(q, k.transpose(-2, -1)) / q.shape[-1] ** 0.5
    weights = F.softmax(masked_fill_min(scores, mask), dim=-1)
    return torch.matmul(F.dropout(weights, dropout_p), v), weights


class MultiHeadAttention(nn.Module):
    """Multi-head attention (Vaswani et al. 2017, sec. 3.2.2): project, split heads, attend, W_o.

    The query/key/value projections live in one ``(3 d_model, d_model)`` weight ``in_proj``
    (rows: queries, keys, values), so self-attention projects with a single matmul;
    cross-attention uses its query rows and, once per batch, its key/value rows
    (:meth:`project_kv`). Heads are split head-major, ``(B, n_heads, T, d_head)``, the layout
    of the incremental key/value cache too.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = False):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.in_proj = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = dropout

    def split_heads(self, x: Tensor) -> Tensor:
        """``(B, T, d_model)`` -> ``(B, n_heads, T, d_head)``."""
        return x.unflatten(-1, (self.n_heads, self.d_head)).transpose(1, 2)

    def merge_heads(self, x: Tensor) -> Tensor:
        """``(B, n_heads, T, d_head)`` -> ``(B, T, d_model)``."""
        return x.transpose(1, 2).flatten(2)

    def _project(self, x: Tensor, parts: slice) -> list[Tensor]:
        """The projections ``parts`` of ``x`` (0 queries, 1 keys, 2 values), split into heads."""
        d = self.d_model
        rows = slice(parts.start * d, parts.stop * d)
        bias = None if self.in_proj.bias is None else self.in_proj.bias[rows]
        y = F.linear(x, self.in_proj.weight[rows], bias)
        return [self.split_heads(part) for part in y.split(d, dim=-1)]

    def project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Self-attention: queries, keys and values of ``x`` ``(B, T, d_model)``, each
        ``(B, n_heads, T, d_head)``."""
        q, k, v = self._project(x, slice(0, 3))
        return q, k, v

    def project_q(self, x: Tensor) -> Tensor:
        """Queries ``(B, n_heads, T, d_head)`` of ``x`` ``(B, T, d_model)``."""
        return self._project(x, slice(0, 1))[0]

    def project_kv(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values of ``x`` ``(B, S, d_model)``, each ``(B, n_heads, S, d_head)``."""
        k, v = self._project(x, slice(1, 3))
        return k, v

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend with projected heads q ``(B, h, Q, d_head)``, k and v ``(B, h, K, d_head)``;
        mask bool broadcastable to ``(B, h, Q, K)``, True at keys to attend. Returns
        ``(B, Q, d_model)`` (after ``W_o``) and, if asked, the weights ``(B, h, Q, K)``."""
        p = self.dropout if self.training else 0.0
        out, weights = dot_product_attention(q, k, v, mask, dropout_p=p,
                                             need_weights=need_weights)
        return self.W_o(self.merge_heads(out)), weights

    def forward(
        self,
        queries: Tensor,
        keys: Tensor,
        values: Tensor,
        valid_lens: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """The recipe's call: ``(B, Q, d_model)`` queries, ``(B, K, d_model)`` keys and values,
        valid lengths ``(B,)`` or ``(B, Q)``. Returns ``(B, Q, d_model)`` and ``(B, h, Q, K)``."""
        q = self.project_q(queries)
        k = self._project(keys, slice(1, 2))[0]
        v = self._project(values, slice(2, 3))[0]
        mask = None
        if valid_lens is not None:
            mask = valid_lens_to_mask(valid_lens, keys.shape[1]).unsqueeze(1)  # (B, 1, Q|1, K)
        return self.attend(q, k, v, mask, need_weights=need_weights)
