"""Attention components: the recipe's oracle values, masking semantics, fused vs explicit paths."""

from __future__ import annotations

import pytest
import torch

from nmt.models.attention import (
    AdditiveAttention,
    DotProductAttention,
    Dropout,
    Mask,
    MultiHeadAttention,
    causal_mask,
    dot_product_attention,
    dropout,
    dropout_mask,
    masked_softmax,
    packed_heads_attention,
    valid_lens_to_mask,
)


def recipe_keys_values() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    keys = torch.ones(2, 10, 2)
    values = torch.arange(40, dtype=torch.float32).reshape(1, 10, 4).repeat(2, 1, 1)
    return keys, values, torch.tensor([2, 6])


ORACLE = torch.tensor([[[2.0, 3.0, 4.0, 5.0]], [[10.0, 11.0, 12.0, 13.0]]])


def test_additive_attention_oracle() -> None:
    torch.manual_seed(0)
    keys, values, valid_lens = recipe_keys_values()
    attention = AdditiveAttention(key_size=2, query_size=20, hidden=8, dropout=0.1).eval()
    out, weights = attention(torch.normal(0, 1, (2, 1, 20)), keys, values, valid_lens)
    torch.testing.assert_close(out, ORACLE)
    assert weights.shape == (2, 1, 10)
    torch.testing.assert_close(weights[0, 0, :2], torch.full((2,), 0.5))
    assert weights[0, 0, 2:].abs().max() == 0 and weights[1, 0, 6:].abs().max() == 0


def test_dot_product_attention_oracle_both_paths() -> None:
    torch.manual_seed(0)
    keys, values, valid_lens = recipe_keys_values()
    attention = DotProductAttention(dropout=0.5).eval()
    queries = torch.normal(0, 1, (2, 1, 2))
    out, weights = attention(queries, keys, values, valid_lens, need_weights=True)
    fast, none = attention(queries, keys, values, valid_lens, need_weights=False)
    torch.testing.assert_close(out, ORACLE)
    torch.testing.assert_close(fast, ORACLE)
    assert none is None and weights is not None
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 1))


def test_additive_projected_keys_equal_recipe_call() -> None:
    torch.manual_seed(1)
    attention = AdditiveAttention(key_size=6, query_size=5, hidden=8).eval()
    q, k, v = torch.randn(3, 4, 5), torch.randn(3, 7, 6), torch.randn(3, 7, 2)
    lens = torch.tensor([7, 1, 4])
    out, w = attention(q, k, v, lens)
    out2, w2 = attention.attend(q, attention.project_keys(k), v, valid_lens_to_mask(lens, 7))
    torch.testing.assert_close(out, out2)
    torch.testing.assert_close(w, w2)


def test_additive_weights_kept_before_dropout() -> None:
    torch.manual_seed(2)
    attention = AdditiveAttention(4, 4, 8, dropout=0.9).train()
    _, w = attention(torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 4))
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 3))


def test_masked_softmax_lengths_per_row_and_per_query() -> None:
    scores = torch.randn(2, 3, 5)
    per_row = masked_softmax(scores, torch.tensor([2, 4]))
    assert per_row[0, :, 2:].abs().max() == 0 and per_row[1, :, 4:].abs().max() == 0
    per_query = masked_softmax(scores, torch.tensor([[1, 2, 3], [5, 4, 1]]))
    for b, lens in enumerate([[1, 2, 3], [5, 4, 1]]):
        for q, n in enumerate(lens):
            torch.testing.assert_close(per_query[b, q, :n], torch.softmax(scores[b, q, :n], -1))
            assert per_query[b, q, n:].abs().sum() == 0
    torch.testing.assert_close(masked_softmax(scores, None), torch.softmax(scores, -1))


def test_masked_softmax_zero_length_is_uniform() -> None:
    w = masked_softmax(torch.randn(1, 2, 4), torch.tensor([0]))
    torch.testing.assert_close(w, torch.full((1, 2, 4), 0.25))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_masked_softmax_low_precision_does_not_overflow(dtype: torch.dtype) -> None:
    # the recipe's -1e6 fill is -inf in fp16; the dtype's own minimum stays finite
    scores = (torch.randn(2, 3, 6) * 100).to(dtype)
    w = masked_softmax(scores, torch.tensor([3, 0]))
    assert w.dtype == dtype and torch.isfinite(w).all()
    assert w[0, :, 3:].float().abs().max() == 0
    torch.testing.assert_close(w.float().sum(-1), torch.ones(2, 3), atol=1e-2, rtol=0)


@pytest.mark.parametrize("n_keys", [5, 20])  # both layouts of the explicit softmax
@pytest.mark.parametrize("causal", [False, True])
def test_fused_and_explicit_paths_agree(causal: bool, n_keys: int) -> None:
    torch.manual_seed(3)
    q = torch.randn(3, 2, n_keys, 4)
    k, v = torch.randn(3, 2, n_keys, 4), torch.randn(3, 2, n_keys, 4)
    mask = valid_lens_to_mask(torch.tensor([n_keys, 2, 3]), n_keys).unsqueeze(1)  # (B,1,1,K)
    if causal:
        mask = mask & causal_mask(n_keys, n_keys)
    fused, none = dot_product_attention(q, k, v, mask, fused=True)
    explicit, no_weights = dot_product_attention(q, k, v, mask, fused=False)
    slow, w = dot_product_attention(q, k, v, mask, need_weights=True)
    assert none is None and no_weights is None and w is not None
    torch.testing.assert_close(fused, explicit)
    torch.testing.assert_close(fused, slow)
    torch.testing.assert_close(w.sum(-1), torch.ones(3, 2, n_keys))
    assert w[1, :, :, 2:].abs().max() == 0
    if causal:
        assert torch.triu(w, diagonal=1).abs().max() == 0
    with pytest.raises(ValueError):
        dot_product_attention(q, k, v, mask, need_weights=True, fused=True)


def per_head_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                       mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The textbook per-head computation, as the reference: output and weights."""
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


PACKED_CASES = [  # (queries, keys, mask kind): training passes, a cached decoding step, no mask
    (5, 5, "causal"), (5, 5, "padding"), (4, 6, "padding"), (1, 6, "padding"), (1, 3, "none"),
    (3, 3, "both"),
]


def packed_case(n_q: int, n_k: int, kind: str, h: int = 4) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(n_q * 10 + n_k)
    q = torch.randn(3, h, n_q, 8, dtype=torch.float64, requires_grad=True)
    k = torch.randn(3, h, n_k, 8, dtype=torch.float64, requires_grad=True)
    v = torch.randn(3, h, n_k, 6, dtype=torch.float64, requires_grad=True)
    padding = valid_lens_to_mask(torch.tensor([n_k, 2, 1]), n_k).unsqueeze(1)  # (3, 1, 1, K)
    causal = causal_mask(n_q, n_k)
    mask = {"causal": causal, "padding": padding, "none": None, "both": padding & causal}[kind]
    return q, k, v, mask


def packed(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: object,
           dropout_p: float = 0.0) -> torch.Tensor:
    """:func:`packed_heads_attention` on head-major ``(B, h, T, d)`` tensors (it takes and gives
    token-major ones, ``(B, T, h, d)``)."""
    out = packed_heads_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                 mask, dropout_p)  # type: ignore[arg-type]
    return out.transpose(1, 2)


@pytest.mark.parametrize(("n_q", "n_k", "kind"), PACKED_CASES)
def test_packed_heads_equal_per_head_attention(n_q: int, n_k: int, kind: str) -> None:
    """All heads in one product, the other heads' keys hidden by the bias: the same outputs
    and gradients as one product per head (float64, so any leak across heads would show)."""
    q, k, v, mask = packed_case(n_q, n_k, kind)
    expected, _ = per_head_attention(q, k, v, mask)
    got = packed(q, k, v, mask)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)
    grad = torch.randn_like(expected)
    torch.testing.assert_close(torch.autograd.grad(got, (q, k, v), grad),
                               torch.autograd.grad(expected, (q, k, v), grad),
                               rtol=1e-10, atol=1e-12)


def test_packed_heads_with_every_key_masked_and_an_empty_batch() -> None:
    """A query whose keys are all masked gets uniform weights over its own head's keys, as on
    the explicit path (no mixing of other heads' values); an empty batch keeps its shape."""
    q, k, v, _ = packed_case(4, 4, "none")
    mask = valid_lens_to_mask(torch.tensor([0, 3, 4]), 4).unsqueeze(1)  # row 0: nothing
    expected, _ = dot_product_attention(q, k, v, mask, need_weights=True)
    torch.testing.assert_close(packed(q, k, v, mask), expected)
    torch.testing.assert_close(expected[0], v[0].mean(dim=1, keepdim=True).expand(4, 4, 6))
    empty = packed(q[:0], k[:0], v[:0], mask[:0])
    assert empty.shape == (0, 4, 4, 6)


def test_packed_heads_dropout_drops_each_heads_own_weights() -> None:
    """Dropout on the packed path: entry (b, q, k, j) of one keep-mask serves query q of head
    j at key k; the result is the per-head attention with those weights dropped and rescaled."""
    q, k, v, mask = packed_case(4, 5, "padding")
    b, h, n_q, n_k = 3, 4, 4, 5
    torch.manual_seed(11)
    got = packed(q, k, v, mask, dropout_p=0.3)
    torch.manual_seed(11)
    keep = dropout_mask((b, n_q, 1, n_k * h), 0.3, q)  # the same draw
    per_head_keep = keep.view(b, n_q, n_k, h).permute(0, 3, 1, 2)  # (B, h, Q, K)
    _, weights = per_head_attention(q, k, v, mask)
    torch.testing.assert_close(got, (weights * per_head_keep) @ v, rtol=1e-12, atol=1e-12)
    assert not torch.equal(got, per_head_attention(q, k, v, mask)[0])  # something was dropped


def test_a_shared_mask_builds_its_bias_once_per_shape() -> None:
    """A stack's layers share one Mask: the packed bias is built on first use, then reused;
    the results equal those with the bare boolean mask."""
    from nmt.models import attention

    q, k, v, keep = packed_case(4, 4, "both")
    built = []
    real = attention.packed_heads_bias

    def spy(*args: object) -> torch.Tensor:
        built.append(args[1:4])
        return real(*args)  # type: ignore[arg-type]

    attention.packed_heads_bias = spy  # type: ignore[assignment]
    try:
        mask = Mask(keep)
        first = packed(q, k, v, mask)
        second = packed(q * 2, k, v, mask)
        assert built == [(4, 4, 4)]
        packed(q[:, :, :2], k, v, Mask(None))  # another mask: its own bias
        assert built == [(4, 4, 4), (4, 2, 4)]
    finally:
        attention.packed_heads_bias = real  # type: ignore[assignment]
    torch.testing.assert_close(first, packed(q, k, v, keep))
    torch.testing.assert_close(second, packed(q * 2, k, v, keep))
    out, _ = dot_product_attention(q, k, v, mask, need_weights=True)  # explicit path unwraps it
    torch.testing.assert_close(out, first)


def test_small_heads_take_the_packed_path() -> None:
    """dot_product_attention packs heads too small for a vectorised product (d2l-sized ones)
    and keeps the per-head products for larger ones; both agree with the weights path."""
    from nmt.models import attention

    calls = []
    real = attention.packed_heads_attention

    def spy(*args: object, **kwargs: object) -> torch.Tensor:
        calls.append(args[0].shape)  # type: ignore[attr-defined]
        return real(*args, **kwargs)  # type: ignore[arg-type]

    attention.packed_heads_attention = spy  # type: ignore[assignment]
    try:
        for n, expect_packed in ((5, True), (12, False)):
            q, k, v, mask = packed_case(n, n, "causal")
            out, _ = dot_product_attention(q, k, v, mask)
            reference, w = dot_product_attention(q, k, v, mask, need_weights=True)
            assert w is not None
            torch.testing.assert_close(out, reference)
            assert (q.transpose(1, 2).shape in calls) == expect_packed
    finally:
        attention.packed_heads_attention = real  # type: ignore[assignment]


def reference_multi_head(mha: MultiHeadAttention, x: torch.Tensor, memory: torch.Tensor,
                         mask: torch.Tensor | None) -> torch.Tensor:
    """The textbook multi-head attention with ``mha``'s weights: queries from ``x``, keys and
    values from ``memory``, split into heads by reshaping each projection, one product per head."""
    d, h = mha.d_model, mha.n_heads
    w, b = mha.in_proj.weight, mha.in_proj.bias

    def heads(t: torch.Tensor, part: int) -> torch.Tensor:  # (B, T, d) -> (B, h, T, d_head)
        y = torch.nn.functional.linear(t, w[part * d:(part + 1) * d],
                                       None if b is None else b[part * d:(part + 1) * d])
        return y.view(t.shape[0], t.shape[1], h, -1).transpose(1, 2)

    out, _ = per_head_attention(heads(x, 0), heads(memory, 1), heads(memory, 2), mask)
    return mha.W_o(out.transpose(1, 2).reshape(x.shape[0], x.shape[1], d))


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("packed_path", [True, False])
def test_multi_head_attention_equals_the_textbook_computation(
    bias: bool, packed_path: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Self- and cross-attention through the projections (query, key and value rows taken head
    by head in one matmul), on the packed path and on the explicit one, as 2-D rows and as
    (B, T, d): the textbook per-head result, outputs and gradients."""
    from nmt.models import attention

    if not packed_path:
        monkeypatch.setattr(attention, "LOOP_MACS", 0)  # every shape takes the explicit path
    torch.manual_seed(3)
    mha = MultiHeadAttention(16, 4, bias=bias).double()
    x = torch.randn(3, 5, 16, dtype=torch.float64)
    memory = torch.randn(3, 6, 16, dtype=torch.float64)
    causal = causal_mask(5, 5)
    padding = valid_lens_to_mask(torch.tensor([6, 2, 4]), 6).unsqueeze(1)  # (B, 1, 1, K)
    calls = []
    real = attention.packed_heads_attention

    def spy(*args: object, **kwargs: object) -> torch.Tensor:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(attention, "packed_heads_attention", spy)
    q, k, v = mha.project_qkv(x.reshape(15, 16), batch=3)  # rows, as the Transformer passes
    got_self, _ = mha.attend(q, k, v, causal)
    got_cross, _ = mha.attend(mha.project_q(x), *mha.project_kv(memory), padding)
    assert len(calls) == (2 if packed_path else 0)
    expected_self = reference_multi_head(mha, x, x, causal).reshape(15, 16)
    expected_cross = reference_multi_head(mha, x, memory, padding).reshape(15, 16)
    torch.testing.assert_close(got_self, expected_self, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got_cross, expected_cross, rtol=1e-12, atol=1e-12)
    params = list(mha.parameters())
    grads = torch.autograd.grad(got_self.sum() + (got_cross ** 2).sum(), params)
    expected = torch.autograd.grad(expected_self.sum() + (expected_cross ** 2).sum(), params)
    torch.testing.assert_close(grads, expected, rtol=1e-10, atol=1e-12)
    recipe_call, _ = mha(x, memory, memory, torch.tensor([6, 2, 4]))  # (B, Q, d), valid lengths
    torch.testing.assert_close(recipe_call.reshape(15, 16), expected_cross)


def test_multi_head_attention_keys_shared_by_the_batch() -> None:
    """Keys and values of batch 1 serve every query row (broadcast), on the shapes that would
    otherwise take the packed path: the same as the keys repeated per row."""
    torch.manual_seed(4)
    mha = MultiHeadAttention(8, 2).eval()
    q = mha.project_q(torch.randn(3, 2, 8))
    k, v = mha.project_kv(torch.randn(1, 4, 8))
    shared, _ = mha.attend(q, k, v)
    repeated, _ = mha.attend(q, k.expand(3, -1, -1, -1), v.expand(3, -1, -1, -1))
    torch.testing.assert_close(shared, repeated)


def test_causal_mask_after_a_cache() -> None:
    assert causal_mask(3, 3).equal(torch.ones(3, 3, dtype=torch.bool).tril())
    # two new queries after three cached positions see the cache and themselves, causally
    expected = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    assert causal_mask(2, 5).equal(expected)


def test_multi_head_attention_shapes_and_paths() -> None:
    torch.manual_seed(4)
    mha = MultiHeadAttention(d_model=16, n_heads=4, dropout=0.3).eval()
    x, mem = torch.randn(2, 3, 16), torch.randn(2, 6, 16)
    lens = torch.tensor([6, 2])
    out_fast, none = mha(x, mem, mem, lens)
    out, w = mha(x, mem, mem, lens, need_weights=True)
    assert none is None and w is not None
    assert out.shape == (2, 3, 16) and w.shape == (2, 4, 3, 6)
    torch.testing.assert_close(out_fast, out)
    assert w[1, ..., 2:].abs().max() == 0
    # separate key and value tensors use the key and value rows of the fused projection
    out_kv, _ = mha(x, mem, mem.clone(), lens)
    torch.testing.assert_close(out_kv, out)


def test_multi_head_attention_without_bias_by_default() -> None:
    assert MultiHeadAttention(8, 2).in_proj.bias is None
    assert MultiHeadAttention(8, 2, bias=True).W_o.bias is not None
    with pytest.raises(ValueError):
        MultiHeadAttention(10, 4)


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_dropout_zeroes_a_share_p_and_rescales_the_rest(p: float) -> None:
    torch.manual_seed(5)
    x = torch.ones(200_000, requires_grad=True)
    y = dropout(x, p, training=True)
    zeros = (y == 0).float().mean().item()
    assert abs(zeros - p) < 0.01
    torch.testing.assert_close(y[y != 0], torch.full_like(y[y != 0], 1 / (1 - p)))
    y.sum().backward()
    assert x.grad is not None
    torch.testing.assert_close(x.grad, y.detach())  # the gradient goes through the same mask
    assert dropout(x, p, training=False) is x and dropout(x, 0.0, training=True) is x
    module = Dropout(p).eval()
    assert module(x) is x and f"p={p}" in repr(module)
