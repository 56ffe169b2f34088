"""One optimizer step of a training: the loss (label-smoothed objective, plain cross-entropy
reported), forward and backward over the step's batches, gradient clipping, the update, and
the accounting of its tokens and loss into metric lines."""

from __future__ import annotations

import time
from contextlib import nullcontext
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from nmt.data.batching import Collator
from nmt.data.tokenizers import PAD_ID
from nmt.device import autocast, autocast_dtype
from nmt.errors import NmtError
from nmt.runs.paths import checkpoint_path
from nmt.training import chunked_output_loss, fused_cross_entropy
from nmt.training.distributed import all_reduce_sum
from nmt.training.state import Progress, Run, TrainingState


def masked_cross_entropy(
    logits: torch.Tensor, tgt_out: torch.Tensor, label_smoothing: float = 0.0
) -> torch.Tensor:
    """Summed per-token cross-entropy over non-pad targets. logits (B,T,V), tgt_out (B,T)."""
    return F.cross_entropy(
        logits.reshape(-1, logits.size(-1)).float(),
        tgt_out.reshape(-1),
        ignore_index=PAD_ID,
        reduction="sum",
        label_smoothing=label_smoothing,
    )


def training_loss(
    logits: torch.Tensor, tgt_out: torch.Tensor, label_smoothing: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(objective, nll)``, both summed over non-pad targets: the objective is what training
    minimises (label-smoothed when asked), ``nll`` the plain cross-entropy (detached) that is
    reported, so train and valid loss are the same measure. With smoothing e the objective is
    ``(1 - e) nll + e mean_v(-log p_v)``, as ``F.cross_entropy(label_smoothing=e)``.

    On the CPU the same is computed by :mod:`nmt.training.fused_cross_entropy` (fewer passes
    over the logits, the gradient in closed form)."""
    if fused_cross_entropy.applies(logits):
        return fused_cross_entropy.training_loss(logits, tgt_out, label_smoothing)
    if label_smoothing == 0.0:
        loss = masked_cross_entropy(logits, tgt_out)
        return loss, loss.detach()
    tgt = tgt_out.reshape(-1)
    logp = torch.log_softmax(logits.reshape(-1, logits.size(-1)).float(), dim=-1)
    nll = F.nll_loss(logp, tgt, ignore_index=PAD_ID, reduction="sum")
    uniform = -(logp.mean(dim=-1) * (tgt != PAD_ID)).sum()
    return (1.0 - label_smoothing) * nll + label_smoothing * uniform, nll.detach()


def train_step(forward: nn.Module, state: TrainingState, group: list[np.ndarray],
               collator: Collator, run: Run) -> tuple[float, float, int]:
    """One optimizer step over the ``len(group)`` batches of ``group``: forward, loss, backward
    for each, then clip the gradients' global norm and update. Returns this rank's sums of the
    objective and of the cross-entropy, and its target tokens."""
    t, dist, device = run.cfg.train, run.dist, run.device
    batches = [collator(indices) for indices in group]
    n_tokens = sum(b.n_tokens for b in batches)
    # Normalise by the tokens of the whole step (all ranks), so accumulation and DDP's gradient
    # averaging give exactly the per-token mean.
    step_tokens = all_reduce_sum(float(n_tokens), dist, device) / dist.world_size
    sums = torch.zeros(2, device=device)  # objective, cross-entropy
    # in fp32 on the CPU the output layer is applied with the loss, by chunks (a speed trick)
    output_layer = chunked_output_loss.output_layer(
        state.model, device, autocast_dtype(device, t.precision), dist.world_size)
    state.optimizer.zero_grad()
    for j, batch in enumerate(batches):
        batch = batch.to(device)
        last = j == len(batches) - 1  # DDP averages the gradients after the last batch only
        no_sync = forward.no_sync if dist.world_size > 1 and not last else nullcontext
        with no_sync():  # type: ignore[operator]
            if output_layer is not None:  # the features; the loss applies the layer
                features = forward(batch.src, batch.src_lengths, batch.tgt_in, project=False)
                objective, nll = chunked_output_loss.training_loss(
                    features, output_layer, batch.tgt_out, t.label_smoothing)
            else:
                with autocast(device, t.precision):
                    logits = forward(batch.src, batch.src_lengths, batch.tgt_in)
                objective, nll = training_loss(logits, batch.tgt_out, t.label_smoothing)
            (objective / step_tokens).backward()
        sums += torch.stack([objective.detach(), nll])
    if t.clip_norm > 0:
        nn.utils.clip_grad_norm_(state.model.parameters(), t.clip_norm)
    state.optimizer.step()
    state.scheduler.step()
    objective_sum, nll_sum = sums.tolist()
    return objective_sum, nll_sum, n_tokens


def account(run: Run, state: TrainingState, loss: float, n_tokens: int,
            invocation_tokens: int) -> dict[str, Any] | None:
    """Count a step's tokens and loss; every ``log_every`` steps write (and return) a metric
    line of the mean train loss since the previous one."""
    prog, t = state.progress, run.cfg.train
    prog.tokens += n_tokens
    prog.window_loss += loss
    prog.window_tokens += n_tokens
    if prog.step % t.log_every:
        return None
    record = {"step": prog.step, "epoch": epoch_label(prog),
              "train_loss": prog.window_loss / max(prog.window_tokens, 1),
              "lr": state.scheduler.get_last_lr()[0],
              "tokens_per_sec": invocation_tokens * run.dist.world_size
              / max(time.perf_counter() - run.started, 1e-9)}
    run.mlog.metric(record)
    prog.window_loss, prog.window_tokens = 0.0, 0
    return record


def epoch_label(prog: Progress) -> int:
    """The 1-based epoch a record belongs to: the current one mid-epoch, the one just completed
    at an epoch boundary."""
    return prog.epoch + (1 if prog.batch_in_epoch else 0)


def non_finite_loss(run: Run, step: int) -> NmtError:
    kept = (f"the last good checkpoint is kept in {run.run_dir}/checkpoints"
            if checkpoint_path(run.run_dir).is_file() else
            "no checkpoint had been saved yet")
    return NmtError(f"non-finite loss at step {step}: training stopped; {kept} (try a lower "
                    "train.lr or train.precision=fp32)")
