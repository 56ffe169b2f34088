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
    owns_group: bool = False  # init_distributed created the process group (and ends it)

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
    owns = not dist.is_initialized()
    if owns:
        dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    return Dist(rank, world, local, owns)


def end_distributed(d: Dist, ok: bool) -> None:
    """Leave the process group that :func:`init_distributed` made. After a run that ended well,
    wait for every rank first: a rank that exits while another is still in the group's last
    operations can be aborted by the backend's threads at interpreter exit."""
    if not d.owns_group:
        return
    import torch.distributed as dist

    if ok:
        dist.barrier()
    dist.destroy_process_group()


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


def any_rank(flags: list[bool], d: Dist, device: torch.device) -> list[bool]:
    """Each flag, true when it is true on any rank: decisions that end the loop or write a
    checkpoint (time budget, a signal) must be the same on every rank, or one rank would wait
    forever in a collective the others never join."""
    if d.world_size == 1:
        return flags
    import torch.distributed as dist

    t = torch.tensor([float(f) for f in flags], dtype=torch.float32, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return [bool(v) for v in t.tolist()]


def from_main(values: list[float | None], d: Dist, device: torch.device) -> list[float | None]:
    """Rank 0's values on every rank (None stays None, NaN stays NaN), so that scores computed
    on each rank lead to the same decisions everywhere (best checkpoint, early stopping)."""
    if d.world_size == 1:
        return values
    import torch.distributed as dist

    flat = [x for v in values for x in ((0.0, 0.0) if v is None else (1.0, v))]
    t = torch.tensor(flat, dtype=torch.float64, device=device)
    dist.broadcast(t, src=0)
    pairs = t.tolist()
    return [pairs[2 * i + 1] if pairs[2 * i] else None for i in range(len(values))]
