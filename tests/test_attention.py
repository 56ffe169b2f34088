"""Attention components: the recipe's oracle values, masking semantics, fused vs explicit paths,
multi-head attention against the per-head textbook computation."""

from __future__ import annotations

import pytest
import torch
from reference_attention import DotProductAttention, masked_softmax

from nmt.models.attention import (
    AdditiveAttention,
    MultiHeadAttention,
    causal_mask,
    dot_product_attention,
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


@pytest.mark.parametrize("n_keys", [5, 20])
@pytest.mark.parametrize("causal", [False, True])
def test_fused_and_explicit_paths_agree(causal: bool, n_keys: int) -> None:
    """Without weights the fused kernel runs, with them the explicit formula: same output."""
    torch.manual_seed(3)
    q = torch.randn(3, 2, n_keys, 4)
    k, v = torch.randn(3, 2, n_keys, 4), torch.randn(3, 2, n_keys, 4)
    mask = valid_lens_to_mask(torch.tensor([n_keys, 2, 3]), n_keys).unsqueeze(1)  # (B,1,1,K)
    if causal:
        mask = mask & causal_mask(n_keys, n_keys)
    fused, none = dot_product_attention(q, k, v, mask)
    explicit, w = dot_product_attention(q, k, v, mask, need_weights=True)
    assert none is None and w is not None
    torch.testing.assert_close(fused, explicit)
    torch.testing.assert_close(w.sum(-1), torch.ones(3, 2, n_keys))
    assert w[1, :, :, 2:].abs().max() == 0
    if causal:
        assert torch.triu(w, diagonal=1).abs().max() == 0


def test_explicit_path_dropout_drops_weights_after_they_are_returned() -> None:
    torch.manual_seed(6)
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 4)
    out, w = dot_product_attention(q, k, v, dropout_p=0.5, need_weights=True)
    clean, w_clean = dot_product_attention(q, k, v, need_weights=True)
    assert w is not None and w_clean is not None
    torch.testing.assert_close(w, w_clean)  # the weights as computed, before dropout
    assert not torch.allclose(out, clean)


def per_head_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                       mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The textbook per-head computation, as the reference: output and weights."""
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


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


@pytest.mark.parametrize("need_weights", [False, True])  # the fused path, the explicit one
@pytest.mark.parametrize("bias", [False, True])
def test_multi_head_attention_equals_the_textbook_computation(bias: bool,
                                                              need_weights: bool) -> None:
    """Self- and cross-attention through the fused projection: the textbook per-head result,
    outputs and gradients (float64, so any mixing of heads or projections would show)."""
    torch.manual_seed(3)
    mha = MultiHeadAttention(16, 4, bias=bias).double()
    x = torch.randn(3, 5, 16, dtype=torch.float64)
    memory = torch.randn(3, 6, 16, dtype=torch.float64)
    causal = causal_mask(5, 5)
    padding = valid_lens_to_mask(torch.tensor([6, 2, 4]), 6).unsqueeze(1)  # (B, 1, 1, K)
    q, k, v = mha.project_qkv(x)
    assert q.shape == k.shape == v.shape == (3, 4, 5, 4)  # head-major (B, h, T, d_head)
    got_self, _ = mha.attend(q, k, v, causal, need_weights=need_weights)
    got_cross, _ = mha.attend(mha.project_q(x), *mha.project_kv(memory), padding,
                              need_weights=need_weights)
    expected_self = reference_multi_head(mha, x, x, causal)
    expected_cross = reference_multi_head(mha, x, memory, padding)
    torch.testing.assert_close(got_self, expected_self, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got_cross, expected_cross, rtol=1e-12, atol=1e-12)
    params = list(mha.parameters())
    grads = torch.autograd.grad(got_self.sum() + (got_cross ** 2).sum(), params)
    expected = torch.autograd.grad(expected_self.sum() + (expected_cross ** 2).sum(), params)
    torch.testing.assert_close(grads, expected, rtol=1e-10, atol=1e-12)
    recipe_call, _ = mha(x, memory, memory, torch.tensor([6, 2, 4]))  # (B, Q, d), valid lengths
    torch.testing.assert_close(recipe_call, expected_cross)


def test_multi_head_attention_keys_shared_by_the_batch() -> None:
    """Keys and values of batch 1 serve every query row (broadcast): the same as the keys
    repeated per row."""
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
