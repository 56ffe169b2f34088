"""The optimizer step: global-norm gradient clipping, then Adam or AdamW.

On the CPU the trainable parameters are made views into one flat buffer, and every step gathers
their gradients into one flat tensor (one ``cat``). Clipping is then one norm and one multiply,
and Adam one fused kernel over one tensor. Over separate tensors the same work loops over every
parameter in Python and in single-tensor kernels (about 50 in the d2l Transformer): 0.7 ms of its
8.8 ms CPU step against 0.3 ms flat. Gradients are not made views of a buffer themselves, as
backward would then add into them instead of handing over its result.

On GPUs the fused kernels already cover all tensors at once, and ``nn.GRU``'s cuDNN path wants its
weights in a buffer of its own, so there the parameters stay as they are.

Either way :meth:`TrainOptimizer.state_dict` is the standard per-parameter Adam state, so a
checkpoint does not depend on the layout and resumes on any device.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from nmt.config import TrainConfig


def _torch_optimizer(t: TrainConfig, params: list[Tensor]) -> torch.optim.Optimizer:
    """Adam or AdamW; the fused kernel where this torch has it."""
    cls = torch.optim.AdamW if t.optimizer == "adamw" else torch.optim.Adam
    kwargs: dict[str, Any] = {"lr": t.lr, "betas": (t.beta1, t.beta2),
                              "weight_decay": t.weight_decay}
    try:
        return cls(params, fused=True, **kwargs)
    except (RuntimeError, TypeError, ValueError):  # older torch, or an unsupported device
        return cls(params, foreach=True, **kwargs)


def clip_grad_norm_flat_(grad: Tensor, max_norm: float) -> Tensor:
    """``torch.nn.utils.clip_grad_norm_`` on one flat gradient: scale it by
    ``min(1, max_norm / (norm + 1e-6))`` in place; returns the norm before clipping."""
    norm = torch.linalg.vector_norm(grad)
    grad.mul_(torch.clamp(max_norm / (norm + 1e-6), max=1.0))
    return norm


class TrainOptimizer:
    """Clipping and Adam/AdamW over ``params``, flat (see the module docstring) or per tensor.

    ``flat`` must be decided before anything else holds the parameters' storage (do it after
    ``model.to(device)``, before wrapping the model). A parameter that gets no gradient in a step
    counts as a zero gradient when flat (Adam's moments still decay); the models here use every
    parameter in every step, so the two layouts train identically up to rounding.
    """

    def __init__(self, t: TrainConfig, params: list[nn.Parameter], *, flat: bool) -> None:
        self.params = [p for p in params if p.requires_grad]
        self.buffer: nn.Parameter | None = None
        self._shapes = [p.shape for p in self.params]
        if flat:
            with torch.no_grad():
                buffer = torch.cat([p.detach().reshape(-1) for p in self.params])
            offset = 0
            for p in self.params:
                n = p.numel()
                p.data = buffer[offset:offset + n].view_as(p)
                offset += n
            self.buffer = nn.Parameter(buffer)  # shares the storage the parameters now view
        self.optimizer = _torch_optimizer(t, [self.buffer] if self.buffer is not None
                                          else list(self.params))

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None
        if self.buffer is not None:
            self.buffer.grad = None

    def step(self, clip_norm: float) -> None:
        """Clip the gradients' global norm to ``clip_norm`` (0: no clipping), then update."""
        if self.buffer is not None:
            grads = [p.grad.reshape(-1) if p.grad is not None else p.new_zeros(p.numel())
                     for p in self.params]
            grad = torch.cat(grads)
            for p in self.params:
                p.grad = None  # the flat copy is the one Adam reads; free these now
            if clip_norm > 0:
                clip_grad_norm_flat_(grad, clip_norm)
            self.buffer.grad = grad
        elif clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.params, clip_norm, foreach=True)
        self.optimizer.step()

    # --- checkpoints: always the standard per-parameter state -----------------------------------

    def state_dict(self) -> dict[str, Any]:
        sd = self.optimizer.state_dict()
        if self.buffer is None:
            return sd
        group = dict(sd["param_groups"][0], params=list(range(len(self.params))))
        flat_state: dict[str, Any] = sd["state"].get(0, {})
        state: dict[int, dict[str, Any]] = {}
        if flat_state:
            offset = 0
            for i, shape in enumerate(self._shapes):
                n = shape.numel()
                state[i] = {key: (value[offset:offset + n].view(shape).clone()
                                  if _is_per_element(value, self.buffer) else _copy(value))
                            for key, value in flat_state.items()}
                offset += n
        return {"state": state, "param_groups": [group]}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        """Load a per-parameter state (as :meth:`state_dict` writes). Raises ValueError when it
        does not fit these parameters."""
        if self.buffer is None:
            self.optimizer.load_state_dict(sd)
            return
        groups = sd.get("param_groups")
        if not isinstance(groups, list) or len(groups) != 1:
            raise ValueError("expected one parameter group in the optimizer state")
        ids = list(groups[0]["params"])
        if len(ids) != len(self.params):
            raise ValueError(f"optimizer state for {len(ids)} parameters, the model has "
                             f"{len(self.params)}")
        per = [sd["state"].get(i) for i in ids]
        flat_state: dict[str, Any] = {}
        present = [s for s in per if s]
        if present:
            for key, value in present[0].items():
                if not isinstance(value, Tensor) or value.dim() == 0:
                    flat_state[key] = value  # e.g. the step count, shared by all
                    continue
                parts = []
                for s, shape in zip(per, self._shapes, strict=True):
                    part = s[key] if s else torch.zeros(shape, dtype=value.dtype)
                    if part.shape != shape:
                        raise ValueError(f"optimizer state {key!r}: shape {tuple(part.shape)}, "
                                         f"the parameter has {tuple(shape)}")
                    parts.append(part.reshape(-1))
                flat_state[key] = torch.cat(parts)
        group = dict(groups[0], params=[0])
        self.optimizer.load_state_dict({"state": {0: flat_state} if flat_state else {},
                                        "param_groups": [group]})


def _is_per_element(value: Any, buffer: Tensor) -> bool:
    return isinstance(value, Tensor) and value.dim() > 0 and value.numel() == buffer.numel()


def _copy(value: Any) -> Any:
    return value.clone() if isinstance(value, Tensor) else value


__all__ = ["TrainOptimizer", "clip_grad_norm_flat_"]
