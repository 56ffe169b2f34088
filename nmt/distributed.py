"""Multi-process training under ``torchrun``: process-group set-up and the few collectives used.

With one process (the usual case) every helper is a no-op, so the loop has no special cases.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Dist:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0


def init_distributed(device_name: str) -> Dist:
    """Join the process group when launched by ``torchrun`` (WORLD_SIZE > 1)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Dist()
    import torch.distributed as dist

    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = device_name != "cpu" and torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(local)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    return Dist(rank, world, local)


def barrier(d: Dist) -> None:
    if d.world_size > 1:
        import torch.distributed as dist

        dist.barrier()


def all_reduce_sum(value: float, d: Dist, device: torch.device) -> float:
    if d.world_size == 1:
        return value
    import torch.distributed as dist

    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return float(t.item())


