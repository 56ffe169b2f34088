"""A speed trick, fenced here: training's label-smoothed cross-entropy and its gradient as one
autograd function, on the CPU.

Written with torch's operators (:func:`nmt.training.step.training_loss`, the readable form),
the loss makes about nine passes over the logits, a float array of batch tokens x vocabulary
(3,400 x 4,000 in the demo, 54 MB): forward, a float copy, the log-softmax and the mean over the
vocabulary; backward, the mean's gradient spread over a new array, a zeroed array for the
targets' gradient, their sum, the log-softmax's backward (an exp), and a copy back to bf16.
Once the matrix products run in bf16 these passes are a third of a step.

The gradient has a closed form. For a target row ``y`` with smoothing ``e`` over ``V`` tokens,
the objective ``(1 - e) (-log p_y) + e mean_v(-log p_v)`` has the derivative
``p_v - (1 - e) [v = y] - e / V`` in logit ``z_v``; a padded row has none. So the forward
computes the log-softmax, picks the targets' entries and sums the rows, and keeps the
log-probabilities; the backward turns them, in place, into that derivative (an exp, a
subtraction, one entry a row, a row scale) and casts it once.

In fp32, for a family whose output layer is separable, :mod:`nmt.training.chunked_output_loss`
goes further and takes this function's place: the output layer and the loss by chunks of
positions, so the logits are never written whole. This one runs in bf16 and for other families.

Measured on the demo's training steps (docs/BENCHMARKS.md, "Training speed on the CPU");
``tests/test_fused_cross_entropy.py`` checks objective, cross-entropy and gradient against
the readable form.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import FunctionCtx, once_differentiable

from nmt.data.tokenizers import PAD_ID


def applies(logits: Tensor) -> bool:
    """Whether training's loss takes this path: on the CPU. (Not measured on a GPU, whose
    kernels make these passes at memory speed; the readable form runs there.)"""
    return logits.device.type == "cpu"


class _LabelSmoothedCrossEntropy(torch.autograd.Function):
    """``(logits (N, V), targets (N,), e)`` -> ``(objective, cross-entropy)``, summed over the
    rows whose target is not ``<pad>``; only the objective is differentiable."""

    @staticmethod
    def forward(ctx: FunctionCtx, logits: Tensor, targets: Tensor,  # type: ignore[override]
                smoothing: float) -> tuple[Tensor, Tensor]:
        logp = torch.log_softmax(logits.float(), dim=-1)
        kept = targets != PAD_ID
        nll_rows = -logp.gather(1, targets[:, None]).squeeze(1)
        nll = torch.where(kept, nll_rows, 0.0).sum()
        if smoothing == 0.0:
            objective = nll.clone()
        else:
            uniform_rows = -logp.sum(dim=-1) / logp.size(1)
            rows = (1.0 - smoothing) * nll_rows + smoothing * uniform_rows
            objective = torch.where(kept, rows, 0.0).sum()
        ctx.save_for_backward(logp, targets, kept)
        ctx.smoothing, ctx.dtype = smoothing, logits.dtype  # type: ignore[attr-defined]
        ctx.mark_non_differentiable(nll)
        return objective, nll

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_objective: Tensor,
                 grad_nll: Tensor) -> tuple[Tensor, None, None]:
        logp, targets, kept = ctx.saved_tensors
        e = ctx.smoothing
        grad = logp.exp_()  # the softmax, written over the saved log-probabilities
        if e:
            grad.sub_(e / grad.size(1))
        rows = torch.arange(grad.size(0), device=grad.device)
        grad[rows, targets] -= 1.0 - e
        grad.mul_(torch.where(kept, grad_objective, 0.0)[:, None])
        return grad.to(ctx.dtype), None, None


def training_loss(logits: Tensor, tgt_out: Tensor,
                  label_smoothing: float = 0.0) -> tuple[Tensor, Tensor]:
    """What :func:`nmt.training.step.training_loss` returns, ``(objective, nll)`` for logits
    ``(B, T, V)`` and targets ``(B, T)``, computed as one function (the gradient of the
    objective alone; ``nll`` comes back detached)."""
    objective, nll = _LabelSmoothedCrossEntropy.apply(
        logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1), label_smoothing)
    return objective, nll
