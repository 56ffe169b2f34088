"""nmt/training/fused_cross_entropy.py's trick: training's label-smoothed loss as one autograd
function gives the readable form's objective, cross-entropy and gradient, in fp32 and from bf16
logits, whatever the shapes, padding and smoothing."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import nmt.training.fused_cross_entropy as fused
from nmt.data.tokenizers import PAD_ID
from nmt.training import step


def readable(logits: torch.Tensor, tgt: torch.Tensor, smoothing: float,
             monkeypatch: pytest.MonkeyPatch) -> tuple[torch.Tensor, torch.Tensor]:
    """``step.training_loss`` as it is written, the trick switched off."""
    with monkeypatch.context() as m:
        m.setattr(fused, "applies", lambda logits: False)
        return step.training_loss(logits, tgt, smoothing)


def loss_and_grad(logits: torch.Tensor, tgt: torch.Tensor, smoothing: float, scale: float,
                  monkeypatch: pytest.MonkeyPatch, *, trick: bool
                  ) -> tuple[float, float, torch.Tensor]:
    x = logits.detach().clone().requires_grad_()
    if trick:
        objective, nll = step.training_loss(x, tgt, smoothing)
    else:
        objective, nll = readable(x, tgt, smoothing, monkeypatch)
    assert objective.requires_grad and not nll.requires_grad
    (objective * scale).backward()
    assert x.grad is not None and x.grad.dtype == logits.dtype
    return float(objective.detach()), float(nll), x.grad.float()


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 4), st.integers(1, 9), st.integers(5, 300), st.integers(0, 2**31 - 1),
       st.sampled_from([0.0, 0.1, 0.3]), st.sampled_from([torch.float32, torch.bfloat16]),
       st.floats(1e-4, 10.0))
def test_the_trick_gives_the_readable_loss_and_gradient(
        batch: int, length: int, vocab: int, seed: int, smoothing: float, dtype: torch.dtype,
        scale: float) -> None:
    monkeypatch = pytest.MonkeyPatch()
    g = torch.Generator().manual_seed(seed)
    logits = (torch.randn(batch, length, vocab, generator=g) * 4).to(dtype)
    tgt = torch.randint(0, vocab, (batch, length), generator=g)
    tgt[torch.rand(batch, length, generator=g) < 0.3] = PAD_ID  # padding, anywhere
    assert fused.applies(logits)
    got = loss_and_grad(logits, tgt, smoothing, scale, monkeypatch, trick=True)
    want = loss_and_grad(logits, tgt, smoothing, scale, monkeypatch, trick=False)
    tokens = max(int((tgt != PAD_ID).sum()), 1)
    assert got[0] == pytest.approx(want[0], rel=1e-5, abs=1e-4 * tokens)
    assert got[1] == pytest.approx(want[1], rel=1e-5, abs=1e-4 * tokens)
    # the gradient: as close as fp32 sums allow, or within one bf16 rounding of the readable one
    tol = 1e-6 if dtype == torch.float32 else 2 ** -8
    assert torch.allclose(got[2], want[2], rtol=tol, atol=tol * scale)
    padded = (tgt == PAD_ID)
    assert torch.all(got[2][padded] == 0)  # a padded row has no gradient


def test_the_readable_form_runs_off_the_cpu() -> None:
    assert fused.applies(torch.zeros(1, 1, 3))
    assert not fused.applies(torch.zeros(1, 1, 3, device="meta"))


def test_it_is_differentiated_once() -> None:
    """The backward writes the gradient over the saved log-probabilities, so a second pass
    through the same graph is refused rather than computed from the overwritten values."""
    logits = torch.randn(2, 3, 7, requires_grad=True)
    tgt = torch.tensor([[4, 5, PAD_ID], [6, 2, 3]])
    objective, _ = fused.training_loss(logits, tgt, 0.1)
    objective.backward(retain_graph=True)
    with pytest.raises(RuntimeError):
        objective.backward()
