"""A speed trick, fenced here: in fp32 on the CPU, the output layer and training's
label-smoothed loss computed together, a few hundred target positions at a time.

Written the readable way, the model's output layer writes the logits of every target position
of the batch, a float array of positions x vocabulary (3,200 x 4,000 in the demo, 51 MB), and
the loss makes its passes over it (:mod:`nmt.training.fused_cross_entropy`: a log-softmax into
a second array of that size, then the gradient written over it). Arrays this large come to the
process as fresh pages at every step and never fit a cache. Here the logits of ``ROWS``
positions at a time are computed into one small reused array, turned into that chunk's loss
and, at once, its gradient (the closed form: softmax, less ``e / V``, less ``1 - e`` at the
target, zero at ``<pad>``), which gives the chunk's share of the gradients of the decoder's
features, of the output weight and of its bias. The backward only scales those three by the
incoming gradient (training's objective is a scalar). The matrix products are the same three
the readable path makes; what goes is the two large arrays and the passes over them.

It takes the place of the model's own output layer: the model gives its decoder's features
(``forward(..., project=False)``, for a family whose ``separable_output`` says its ``out`` is
an ``nn.Linear`` applied last). In bf16 (autocast), with several processes, or for another
family, the readable path and the fused loss run as before.

Measured on the demo's training steps in fp32 (docs/BENCHMARKS.md, "The output layer and
the loss by chunks, fp32 on the CPU": ``python -m bench.chunked_loss``);
``tests/test_chunked_output_loss.py`` checks objective, cross-entropy and every gradient
against the output layer and the readable loss.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from nmt.data.tokenizers import PAD_ID

ROWS = 512  # target positions a chunk: 512 x 4,000 floats is 8 MB (256 was measured slower)


def output_layer(model: nn.Module, device: torch.device, autocast_dtype: torch.dtype | None,
                 world_size: int) -> nn.Linear | None:
    """The output layer a training step applies with the loss, where it takes this path: on the
    CPU, in fp32, in one process, for a family whose output layer is separable
    (``EncoderDecoder.separable_output``); None elsewhere."""
    out = getattr(model, "out", None)
    if (device.type == "cpu" and autocast_dtype is None and world_size == 1
            and getattr(model, "separable_output", False) and isinstance(out, nn.Linear)):
        return out
    return None


class _ChunkedOutputLoss(torch.autograd.Function):
    """``(features (N, D), weight (V, D), bias (V) or None, targets (N,), e)`` ->
    ``(objective, cross-entropy)`` of the logits ``features @ weight.T + bias``, summed over the
    rows whose target is not ``<pad>``; only the objective is differentiable."""

    @staticmethod
    def forward(ctx: Any, features: Tensor, weight: Tensor,  # type: ignore[override]
                bias: Tensor | None, targets: Tensor, smoothing: float) -> tuple[Tensor, Tensor]:
        n_rows, vocab = features.size(0), weight.size(0)
        e = smoothing
        want_features, want_weight, want_bias = ctx.needs_input_grad[:3]
        grad_features = torch.empty_like(features) if want_features else None
        grad_weight = torch.zeros_like(weight) if want_weight else None
        grad_bias = torch.zeros_like(bias) if want_bias and bias is not None else None
        # the mean of a row's logits, for the smoothing term, without reading them:
        # mean_v(h . w_v + b_v) = h . mean_v(w_v) + mean_v(b_v)
        mean_weight = weight.mean(0)
        mean_bias = bias.mean() if bias is not None else 0.0
        objective = features.new_zeros(())
        nll = features.new_zeros(())
        chunk = features.new_empty(min(ROWS, n_rows), vocab)
        for start in range(0, n_rows, ROWS):
            h = features[start:start + ROWS]
            y = targets[start:start + ROWS]
            rows = h.size(0)
            z = chunk[:rows]
            if bias is None:
                torch.mm(h, weight.t(), out=z)
            else:
                torch.addmm(bias, h, weight.t(), out=z)
            kept = (y != PAD_ID).to(z.dtype)
            z_target = z.gather(1, y[:, None]).squeeze(1)
            z_mean = h @ mean_weight + mean_bias
            z_max = z.amax(dim=1, keepdim=True)
            z.sub_(z_max).exp_()  # the chunk's unnormalised softmax, in place
            total = z.sum(dim=1)
            log_total = total.log() + z_max.squeeze(1)  # logsumexp of each row
            nll_rows = kept * (log_total - z_target)
            nll += nll_rows.sum()
            objective += ((1.0 - e) * nll_rows + e * kept * (log_total - z_mean)).sum()
            # the gradient of the rows' objective in their logits, over the softmax in place:
            # kept * (p_v - e / V - (1 - e) [v = y])
            torch.addcmul((-e / vocab) * kept[:, None], z, (kept / total)[:, None], out=z)
            z[torch.arange(rows), y] -= (1.0 - e) * kept
            if grad_features is not None:
                torch.mm(z, weight, out=grad_features[start:start + rows])
            if grad_weight is not None:
                grad_weight.addmm_(z.t(), h)
            if grad_bias is not None:
                grad_bias += z.sum(dim=0)
        ctx.save_for_backward(grad_features, grad_weight, grad_bias)
        ctx.mark_non_differentiable(nll)
        return objective, nll

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_objective: Tensor, grad_nll: Tensor
                 ) -> tuple[Tensor | None, Tensor | None, Tensor | None, None, None]:
        grad_features, grad_weight, grad_bias = (
            None if g is None else g.mul_(grad_objective) for g in ctx.saved_tensors)
        return grad_features, grad_weight, grad_bias, None, None


def training_loss(features: Tensor, out: nn.Linear, tgt_out: Tensor,
                  label_smoothing: float = 0.0) -> tuple[Tensor, Tensor]:
    """What :func:`nmt.training.step.training_loss` returns for ``out(features)``,
    ``(objective, nll)`` for features ``(B, T, D)`` and targets ``(B, T)``, without the logits
    (``nll`` comes back detached)."""
    objective, nll = _ChunkedOutputLoss.apply(
        features.reshape(-1, features.size(-1)), out.weight, out.bias, tgt_out.reshape(-1),
        label_smoothing)
    return objective, nll


__all__ = ["ROWS", "output_layer", "training_loss"]
