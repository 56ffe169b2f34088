"""An exponential moving average of the weights (Marian's "exponential smoothing").

After every optimizer step the average moves a little towards the new weights::

    avg <- d * avg + (1 - d) * w,    d = min(decay, (1 + n) / (10 + n))

where ``n`` counts the updates so far (1 for the first). The second term of the ``min`` is a
warm-up: early on the average follows the weights closely instead of remembering the random
initialisation for ~1 / (1 - decay) steps. The average is what validation scores, what ``best.pt``
is chosen by and what translation uses; the raw weights keep training. Both are saved, so a
resumed run continues the average exactly.
"""

from __future__ import annotations

import copy
from typing import Any, Generic, TypeVar

import torch
from torch import nn

M = TypeVar("M", bound=nn.Module)


class ExponentialMovingAverage(Generic[M]):
    """A frozen copy of ``model`` whose parameters are the moving average of ``model``'s."""

    def __init__(self, model: M, decay: float) -> None:
        if not 0.0 < decay < 1.0:
            raise ValueError(f"decay={decay}: expected 0 < decay < 1")
        self.decay = decay
        self.updates = 0
        self.model: M = copy.deepcopy(model).eval().requires_grad_(False)

    def rate(self) -> float:
        """The decay ``d`` of the next update."""
        n = self.updates + 1
        return min(self.decay, (1 + n) / (10 + n))

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """Move the average towards ``model``'s current parameters."""
        d = self.rate()
        averages: list[torch.Tensor] = list(self.model.parameters())
        weights: list[torch.Tensor] = [w.detach() for w in model.parameters()]
        if len(averages) != len(weights):
            raise ValueError(f"the average has {len(averages)} parameters, the model "
                             f"{len(weights)}")
        # avg.lerp_(w, 1 - d) for every pair, in one kernel for all on a GPU (as
        # torch.optim.swa_utils averages) instead of one launch per parameter
        torch._foreach_lerp_(averages, weights, 1.0 - d)
        self.updates += 1

    def state_dict(self) -> dict[str, Any]:
        return {"decay": self.decay, "updates": self.updates,
                "weights": self.model.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["weights"])
        self.updates = int(state["updates"])
