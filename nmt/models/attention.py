"""Attention components: masked softmax, additive (Bahdanau), scaled dot-product, multi-head.

Masks are boolean and True where a key may be attended (the convention of
``torch.nn.functional.scaled_dot_product_attention``). Masked scores are filled with the dtype's
most negative finite value rather than the recipe's -1e6, which overflows in fp16.

Modules return their weights instead of keeping them as attributes, so one module can serve
several batches (or a training step and a picture) without hidden per-batch state.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@functools.lru_cache(maxsize=32)
def _scalar(value: float, dtype: torch.dtype, device: torch.device) -> Tensor:
    """A 0-dim tensor of ``value`` (read-only by convention): an in-place op with a Python number
    first converts the number into such a tensor, which costs as much as the op on a small one."""
    return torch.tensor(value, dtype=dtype, device=device)


def dropout_mask(shape: tuple[int, ...], p: float, like: Tensor) -> Tensor:
    """Inverted-dropout keep mask of ``shape``: 0 with probability p, else ``1 / (1 - p)``."""
    noise = torch.rand(shape, device=like.device, dtype=like.dtype)
    if torch.compiler.is_compiling():  # compiled code folds the numbers in; no cache to trace
        return noise.ge_(p).mul_(1.0 / (1.0 - p))
    # in place: 1.0 where kept, then the scale
    return noise.ge_(_scalar(p, like.dtype, like.device)).mul_(
        _scalar(1.0 / (1.0 - p), like.dtype, like.device))


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """Inverted dropout (same as ``F.dropout``), cheaper on the CPU.

    There ``bernoulli_`` draws one element at a time and measured about 2x the cost of a
    uniform draw and a comparison, and dropout is a large share of a small model's step.
    """
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu":
        return F.dropout(x, p, training=True)
    return x * dropout_mask(x.shape, p, x)


class Dropout(nn.Module):
    """``nn.Dropout`` through :func:`dropout`."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


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
        self.dropout = Dropout(dropout)

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


# CPU softmax kernels take rows shorter than one SIMD vector (16 floats with AVX-512) one
# element at a time, ~8x slower than a 16-wide row; NMT batches often have fewer keys than that.
_SHORT_ROWS = 16
# CPU batched matmul runs each product of fewer than LOOP_MACS multiply-adds (rows x cols x
# inner) in an unvectorised loop at ~1.4 ns per multiply-add; a head's product is that small when
# a batch holds short sentences (4 x 4 x 8 or 5 x 5 x 8 in the d2l presets). Packing all heads of
# a batch row into one product (:func:`packed_heads_attention`) does h times the arithmetic in
# MKL and measured 35-40% less time forward and backward for such shapes (6% less at 8 x 8 x 8).
LOOP_MACS = 400
_PACKED_MAX_KEYS = 64  # heads x keys: past this the h-fold arithmetic outweighs the loop


def _packs_heads(n_heads: int, n_q: int, n_k: int, d: int, device: torch.device) -> bool:
    """Whether attention of these shapes takes the packed-heads path
    (:func:`packed_heads_attention`)."""
    return (device.type == "cpu" and n_q * n_k * d < LOOP_MACS
            and n_heads * max(n_q, n_k) <= _PACKED_MAX_KEYS)


class Mask:
    """A boolean attention mask (True at keys to attend, or None: every key) that the layers of
    a stack share.

    The packed-heads path uses a mask as an additive bias over the packed scores; a ``Mask``
    keeps the bias made for the first layer, so a stack builds it once per batch instead of
    once per layer. Build a new ``Mask`` for every batch (it does not watch ``keep`` change).
    """

    def __init__(self, keep: Tensor | None) -> None:
        self.keep = keep
        self._biases: dict[tuple[int, int, int, torch.dtype, torch.device], Tensor] = {}

    def packed_bias(self, n_heads: int, n_q: int, n_k: int, dtype: torch.dtype,
                    device: torch.device) -> Tensor:
        """:func:`packed_heads_bias` of this mask, made on the first call."""
        key = (n_heads, n_q, n_k, dtype, device)
        bias = self._biases.get(key)
        if bias is None:
            bias = self._biases[key] = packed_heads_bias(self.keep, n_heads, n_q, n_k, dtype,
                                                         device)
        return bias


def _keep(mask: Tensor | Mask | None) -> Tensor | None:
    return mask.keep if isinstance(mask, Mask) else mask


def packed_heads_bias(mask: Tensor | None, n_heads: int, n_q: int, n_k: int,
                      dtype: torch.dtype, device: torch.device) -> Tensor:
    """The additive bias ``(B or 1, Q h, K h)`` of :func:`packed_heads_attention`. Row ``q h + i``
    (query ``q`` of head ``i``), column ``k h + j`` (key ``k`` of head ``j``): 0 where ``j = i`` and
    the key may be seen, half the dtype's most negative value where ``j = i`` and it is masked,
    the most negative value where ``j != i``. Scores are far too small to move either, so a
    query whose keys are all masked gets equal scores on its own head's keys, and uniform
    weights over them, as on the explicit path. mask: bool, broadcastable to ``(B, h, Q, K)``."""
    h = n_heads
    own_head = torch.eye(h, dtype=torch.bool, device=device)[None, None, :, None, :]  # (1,1,h,1,h)
    lowest = torch.finfo(dtype).min
    zero = torch.zeros((), dtype=dtype, device=device)
    if mask is None:
        within = zero
    else:
        m = mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))  # (B|1, h|1, Q|1, K)
        within = torch.where(m.transpose(1, 2)[..., None], zero, lowest / 2)  # (B|1,Q|1,h|1,K,1)
    bias = torch.where(own_head, within, lowest)
    return bias.expand(bias.shape[0], n_q, h, n_k, h).reshape(-1, n_q * h, n_k * h)


def packed_heads_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | Mask | None = None, dropout_p: float = 0.0
) -> Tensor:
    """Scaled dot-product attention with the heads of each batch row in one matrix product.

    Token-major heads: q ``(B, Q, h, d)``, k ``(B, K, h, d)``, v ``(B, K, h, d_v)``, the layout
    a projection gives without a copy; mask as for :func:`dot_product_attention` (over
    ``(B, h, Q, K)``). Returns ``(B, Q, h, d_v)``, which is ``(B, Q, h d_v)`` as it stands.
    Row ``q h + i`` of the packed ``(Q h, K h)`` scores is query ``q`` of head ``i`` against the
    keys of every head; an additive bias of the dtype's most negative value hides the other
    heads' keys (and the masked ones), so their weights come out exactly 0 and the result equals
    the per-head computation up to rounding (a query with all its keys masked gets uniform
    weights over its own head's keys, as there). Weights are not returned (the explicit path
    gives them).
    """
    b, n_q, h, d = q.shape
    n_k = k.shape[1]
    shared = mask if isinstance(mask, Mask) else Mask(mask)
    bias = shared.packed_bias(h, n_q, n_k, q.dtype, q.device)
    keys = k.reshape(b, n_k * h, d).transpose(1, 2)
    scores = torch.baddbmm(bias, q.reshape(b, n_q * h, d), keys, alpha=d ** -0.5)
    weights = torch.softmax(scores, dim=-1)
    if dropout_p > 0.0:
        # Keep-mask entry (b, q, k, j) serves query q of head j at key k: one draw per weight
        # that is not 0 by construction. It is shared by all heads' rows of query q, where it
        # multiplies the zeros of the other heads' keys, so the product broadcasts over one
        # axis rather than needing a copy of the mask per head.
        drop = dropout_mask((b, n_q, 1, n_k * h), dropout_p, weights)
        weights = (weights.view(b, n_q, h, n_k * h) * drop).view(b, n_q * h, n_k * h)
    d_v = v.shape[-1]
    return torch.bmm(weights, v.reshape(b, n_k * h, d_v)).view(b, n_q, h, d_v)


def dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | Mask | None = None,
    *,
    dropout_p: float = 0.0,
    need_weights: bool = False,
    fused: bool | None = None,
) -> tuple[Tensor, Tensor | None]:
    """Scaled dot-product attention ``softmax(Q K^T / sqrt(d)) V`` over the last two axes.

    q ``(..., Q, d)``, k ``(..., K, d)``, v ``(..., K, d_v)``; mask bool broadcastable to
    ``(..., Q, K)``, True at keys to attend (see :func:`causal_mask`), or a :class:`Mask` holding
    one. Returns ``(..., Q, d_v)``
    and, with ``need_weights``, the weights ``(..., Q, K)`` taken before dropout (else None).

    ``fused`` picks ``F.scaled_dot_product_attention`` (one kernel, no weights) or the explicit
    matmul-softmax-matmul; by default the fused kernel runs unless weights are asked for or the
    tensors are on the CPU, where for NMT-sized shapes (d_head 8-64, up to ~30 positions) the
    explicit form measured 10-40% faster forward and backward, and where heads too small for a
    vectorised product go through :func:`packed_heads_attention`. A row with every key masked
    gives zeros on the fused path and uniform weights on the explicit one; it does not occur
    in practice, as every source holds at least ``<eos>``.
    """
    if fused is None:
        fused = not need_weights and q.device.type != "cpu"
    if (not fused and not need_weights and q.dim() == 4 and k.shape[:2] == q.shape[:2]
            and _packs_heads(q.shape[1], q.shape[2], k.shape[2], q.shape[3], q.device)):
        out = packed_heads_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                     mask, dropout_p)
        return out.transpose(1, 2), None
    mask = _keep(mask)
    if fused:
        if need_weights:
            raise ValueError("the fused attention kernel does not return weights")
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p), None
    q = q * q.shape[-1] ** -0.5
    if k.shape[-2] < _SHORT_ROWS:  # scores laid out (..., K, Q): the softmax runs down columns
        scores = torch.matmul(k, q.transpose(-2, -1))
        if mask is not None:
            scores = masked_fill_min(scores, mask.transpose(-2, -1))
        weights = torch.softmax(scores, dim=-2).transpose(-2, -1)
    else:
        weights = torch.softmax(masked_fill_min(torch.matmul(q, k.transpose(-2, -1)), mask), -1)
    dropped = dropout(weights, dropout_p, training=True)
    return torch.matmul(dropped, v), weights if need_weights else None


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


class MultiHeadAttention(nn.Module):
    """Multi-head attention (Vaswani et al. 2017, sec. 3.2.2): project, split heads, attend, W_o.

    The query/key/value projections live in one ``(3 d_model, d_model)`` weight (rows: queries,
    keys, values, each head after head) so that self-attention is a single matmul;
    cross-attention uses its query rows and, once per batch, its key/value rows
    (:meth:`project_kv`).

    Heads are token-major, ``(B, T, n_heads, d_head)``: when two or three projections share a
    matmul, the call takes the weight's rows head by head (each head's query, key and value
    rows together), so every projection is a strided view of the one output, with no copy, and
    the packed-heads path (:func:`packed_heads_attention`) reads them as they are. The
    incremental key/value cache stores this layout. Inputs are ``(B, T, d_model)`` or, with
    ``batch=B``, the ``(B T, d_model)`` rows the Transformer keeps its activations in (a linear
    layer on 2-D rows needs no reshapes forward or backward).
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = False):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.in_proj = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = dropout

    def _project(self, x: Tensor, first: int, n: int, batch: int | None) -> tuple[Tensor, ...]:
        """Projections ``first .. first + n - 1`` (0 queries, 1 keys, 2 values) of ``x``, each
        ``(B, T, n_heads, d_head)``."""
        d, h = self.d_model, self.n_heads
        rows = slice(first * d, (first + n) * d)
        w: Tensor = self.in_proj.weight[rows]
        b: Tensor | None = None if self.in_proj.bias is None else self.in_proj.bias[rows]
        if n > 1:  # rows head by head: output (..., h, n, d_head), each projection a view
            w = w.view(n, h, self.d_head, d).transpose(0, 1).reshape(n * d, d)
            b = None if b is None else b.view(n, h, self.d_head).transpose(0, 1).reshape(-1)
        y = F.linear(x, w, b)
        batch = x.shape[0] if batch is None else batch
        return y.view(batch, -1, h, n, self.d_head).unbind(3)

    def project_qkv(self, x: Tensor, batch: int | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Self-attention projections of ``x``, each ``(B, T, h, d_head)``."""
        q, k, v = self._project(x, 0, 3, batch)
        return q, k, v

    def project_q(self, x: Tensor, batch: int | None = None) -> Tensor:
        """Queries ``(B, T, h, d_head)`` of ``x``."""
        return self._project(x, 0, 1, batch)[0]

    def project_kv(self, x: Tensor, batch: int | None = None) -> tuple[Tensor, Tensor]:
        """Keys and values of ``x`` (``(B, S, d_model)`` or rows), each ``(B, S, h, d_head)``."""
        k, v = self._project(x, 1, 2, batch)
        return k, v

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | Mask | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend with projected heads q ``(B, Q, h, d_head)``, k and v ``(B, K, h, d_head)``.
        Returns the output rows ``(B Q, d_model)`` (after ``W_o``) and, if asked, the weights
        ``(B, h, Q, K)``.

        mask: bool, broadcastable to ``(B, h, Q, K)``, True at keys to attend (or a :class:`Mask`).
        """
        p = self.dropout if self.training else 0.0
        b, n_q, h, d = q.shape
        same_batch = k.shape[0] == b and v.shape[0] == b  # else keys broadcast over the batch
        if not need_weights and same_batch and _packs_heads(h, n_q, k.shape[1], d, q.device):
            out = packed_heads_attention(q, k, v, mask, p)  # (B, Q, h, d_head)
            weights = None
        else:
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # head-major (B, h, T, d_head)
            if need_weights or q.device.type == "cpu":
                # the explicit matmuls: one copy here rather than one inside each of them (the
                # fused kernel on GPUs reads the strided views as they are)
                q, k, v = (t.contiguous() for t in (q, k, v))
            out, weights = dot_product_attention(q, k, v, mask, dropout_p=p,
                                                 need_weights=need_weights)
            out = out.transpose(1, 2)
        return self.W_o(out.reshape(b * n_q, self.d_model)), weights

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
        if keys is values:
            k, v = self.project_kv(keys)
        else:
            k = self._project(keys, 1, 1, None)[0]
            v = self._project(values, 2, 1, None)[0]
        mask = None
        if valid_lens is not None:
            mask = valid_lens_to_mask(valid_lens, keys.shape[1]).unsqueeze(1)  # (B, 1, Q|1, K)
        out, weights = self.attend(q, k, v, mask, need_weights=need_weights)
        return out.view(queries.shape[0], queries.shape[1], self.d_model), weights
