"""The best token by blocks (nmt/translation/blocked_argmax.py) is torch.argmax's: the first of
equal maxima, never a column of ``never``, whatever the width, ties and infinities."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from nmt.translation import blocked_argmax
from nmt.translation.blocked_argmax import BLOCK, argmax_rows


def reference(scores: torch.Tensor, never: tuple[int, ...]) -> torch.Tensor:
    masked = scores.clone()
    masked[:, list(never)] = -math.inf
    return masked.argmax(dim=1)


@settings(max_examples=300, deadline=None)
@given(rows=st.integers(0, 9), width=st.integers(2 * BLOCK, 5 * BLOCK + 7),
       levels=st.integers(1, 6), never=st.sets(st.integers(0, 2 * BLOCK + 20), max_size=3),
       infinities=st.integers(0, 3), dtype=st.sampled_from([torch.float32, torch.bfloat16]),
       seed=st.integers(0, 2**31 - 1))
def test_blocks_give_the_argmax(rows: int, width: int, levels: int, never: set[int],
                                infinities: int, dtype: torch.dtype, seed: int) -> None:
    """Few distinct levels make ties everywhere (within a block, across blocks, in the head and
    the tail); whole rows of -inf and +inf scores are mixed in."""
    g = torch.Generator().manual_seed(seed)
    scores = torch.randint(0, levels, (rows, width), generator=g).to(dtype)
    if rows and infinities:
        r = torch.randint(0, rows, (infinities,), generator=g)
        c = torch.randint(0, width, (infinities,), generator=g)
        scores[r, c] = torch.tensor([-math.inf, math.inf, -math.inf])[:infinities].to(dtype)
    if rows > 1:
        scores[0] = -math.inf  # nothing but -inf: the first column that is not `never`
    ids = tuple(sorted(i for i in never if i < width))  # any column, the last ones too
    before = scores.clone()
    assert torch.equal(argmax_rows(scores, ids), reference(scores, ids))
    assert torch.equal(scores, before)  # the scores are not changed


def test_a_never_column_that_holds_the_maximum_is_passed_over() -> None:
    scores = torch.zeros(2, 4 * BLOCK)
    scores[:, 1] = 9.0  # <pad>'s column
    scores[0, 70] = 5.0
    assert argmax_rows(scores, (1, 2)).tolist() == [70, 0]
    assert argmax_rows(scores).tolist() == [1, 1]
    # a never column in the last, partial block: the blocks holding it are the whole row
    tail = torch.zeros(1, 2 * BLOCK + 6)
    tail[0, 2 * BLOCK + 2] = 9.0
    assert argmax_rows(tail, (2 * BLOCK + 2,)).tolist() == [0]


def test_only_wide_cpu_scores_take_the_path() -> None:
    assert blocked_argmax.applies(torch.zeros(3, 2 * BLOCK))
    assert not blocked_argmax.applies(torch.zeros(3, 2 * BLOCK - 1))
    assert not blocked_argmax.applies(torch.zeros(3, 4, 2 * BLOCK))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_keeps_torchs_argmax() -> None:
    assert not blocked_argmax.applies(torch.zeros(3, 4 * BLOCK, device="cuda"))
