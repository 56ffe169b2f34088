"""nmt/models/one_query_attention.py's trick: one query attended in bf16 on the CPU by
element-wise products gives what torch's fused kernel gives, within bf16's rounding, and is
taken only there."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import nmt.models.one_query_attention as one_query
from nmt.models.attention import dot_product_attention


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              mask: torch.Tensor | None) -> torch.Tensor:
    """The formula in float64."""
    q, k, v = q.double(), k.double(), v.double()
    s = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1) @ v


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(1, 4), st.integers(1, 40), st.sampled_from([8, 32, 64]),
       st.integers(0, 2**31 - 1), st.booleans())
def test_one_query_in_bf16_is_the_fused_kernel_within_rounding(
        batch: int, heads: int, keys: int, dim: int, seed: int, masked: bool) -> None:
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(batch, heads, n, dim, generator=g).to(torch.bfloat16)
               for n in (1, keys, keys))
    mask = None
    if masked:  # padded sources: each row attends to its first `valid` keys (at least one)
        valid = torch.randint(1, keys + 1, (batch,), generator=g)
        mask = (torch.arange(keys)[None, :] < valid[:, None])[:, None, None, :]
    assert one_query.applies(q, 0.0)
    out, weights = dot_product_attention(q, k, v, mask)
    fused = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    exact = reference(q, k, v, mask)
    assert weights is None and out.shape == fused.shape == (batch, heads, 1, dim)
    # no further from the exact value than bf16 allows, and as close as the fused kernel
    err, fused_err = ((x.double() - exact).abs().max().item() for x in (out, fused))
    assert err <= 0.05 * (1 + exact.abs().max().item())
    assert err <= 4 * fused_err + 0.02
    if mask is not None:  # a masked key's value changes nothing
        hidden = ~mask[:, 0, 0, :]  # (batch, keys)
        k2, v2 = k.clone(), v.clone()
        k2[hidden[:, None, :, None].expand_as(k2)] = 100.0
        v2[hidden[:, None, :, None].expand_as(v2)] = 100.0
        assert torch.equal(dot_product_attention(q, k2, v2, mask)[0], out)


@pytest.mark.parametrize(("dtype", "queries", "dropout"), [
    (torch.float32, 1, 0.0), (torch.bfloat16, 3, 0.0), (torch.bfloat16, 1, 0.1)])
def test_elsewhere_the_fused_kernel_runs(dtype: torch.dtype, queries: int,
                                         dropout: float) -> None:
    """fp32, several queries (training, the encoder) or dropout: torch's kernel, bit for bit."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, n, 32, generator=g).to(dtype) for n in (queries, 9, 9))
    assert not one_query.applies(q, dropout)
    torch.manual_seed(1)
    out, _ = dot_product_attention(q, k, v, None, dropout_p=dropout)
    torch.manual_seed(1)
    assert torch.equal(out, F.scaled_dot_product_attention(q, k, v, dropout_p=dropout))
