"""Optimisation: Adam or AdamW, the learning-rate schedule, and a resumed run's new settings."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from nmt.config import TrainConfig


def lr_lambda(schedule: str, warmup: int) -> Callable[[int], float]:
    """Multiplier of the peak lr at optimizer step ``s`` (0-based).

    ``inverse_sqrt`` is the Transformer paper's schedule (sec. 5.3) scaled to peak at 1: a linear
    warm-up over ``warmup`` steps, then decay with the inverse square root of the step.
    """
    if schedule == "inverse_sqrt":
        w = max(warmup, 1)
        return lambda s: min((s + 1) / w, math.sqrt(w / (s + 1)))
    return lambda s: 1.0


def build_optimizer(t: TrainConfig, model: nn.Module) -> tuple[torch.optim.Optimizer, LambdaLR]:
    """Adam or AdamW over the model's trainable parameters, and its learning-rate schedule.

    The fused kernel (one kernel for all parameters) where this torch and device have it.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    cls = torch.optim.AdamW if t.optimizer == "adamw" else torch.optim.Adam
    kwargs: dict[str, Any] = {"lr": t.lr, "betas": (t.beta1, t.beta2),
                              "weight_decay": t.weight_decay}
    try:
        optimizer = cls(params, fused=True, **kwargs)
    except (RuntimeError, TypeError, ValueError):  # older torch, or an unsupported device
        optimizer = cls(params, foreach=True, **kwargs)
    return optimizer, LambdaLR(optimizer, lr_lambda(t.schedule, t.warmup_steps))


def use_config_hyperparameters(optimizer: torch.optim.Optimizer, scheduler: LambdaLR,
                               t: TrainConfig) -> None:
    """After loading a checkpoint's optimizer and scheduler state, take the learning rate,
    betas and weight decay from the config (``--resume --set train.lr=...``): only Adam's
    moments and the step count carry over. Unchanged settings give the same values as saved."""
    scheduler.base_lrs = [t.lr for _ in scheduler.base_lrs]
    for group, base, factor in zip(optimizer.param_groups, scheduler.base_lrs,
                                   scheduler.lr_lambdas, strict=True):
        group.update(lr=base * factor(scheduler.last_epoch), initial_lr=base,
                     betas=(t.beta1, t.beta2), weight_decay=t.weight_decay)
    scheduler._last_lr = [group["lr"] for group in optimizer.param_groups]  # type: ignore[attr-defined]


__all__ = ["build_optimizer", "lr_lambda", "use_config_hyperparameters"]
