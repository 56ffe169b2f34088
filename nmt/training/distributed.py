"""Multi-process training under ``torchrun``: process-group set-up and the few collectives used.

With one process (the usual case) every helper is a no-op, so the loop has no special cases.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from nmt import environment
from nmt.errors import ConfigError, NmtError, first_line, shown


@dataclass(frozen=True)
class Dist:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    owns_group: bool = False  # init_distributed created the process group (and ends it)

    @property
    def main(self) -> bool:
        return self.rank == 0


LAUNCHER = "set by torchrun; launch with `torchrun --nproc_per_node N -m nmt train ...`"


def launcher_variable(name: str) -> str:
    """The environment variable ``name``, which a run of several processes needs (a one-line
    error naming it when it is unset or empty)."""
    text = environment.read(name)
    if not text:
        raise ConfigError(f"{name}: not set, but WORLD_SIZE is more than 1 ({LAUNCHER})")
    return text


def launcher_int(name: str, default: int | None, least: int, most: int) -> int:
    """The whole number in the environment variable ``name`` (``default`` when unset or empty;
    None: it must be set), from ``least`` to ``most``, or a one-line error naming the
    variable."""
    text = environment.read(name) or ""
    if not text and default is not None:
        return default
    text = text or launcher_variable(name)  # unset: an error
    try:
        value = int(text)
    except ValueError:
        value = least - 1
    if not least <= value <= most:
        raise ConfigError(f"{name}={shown(text, 40)}: expected a whole number from {least} "
                          f"to {most} ({LAUNCHER})")
    return value


def init_distributed(device_name: str) -> Dist:
    """Join the process group when launched by ``torchrun`` (WORLD_SIZE > 1), checking the
    launcher's variables first."""
    world = launcher_int("WORLD_SIZE", 1, 1, 2**31 - 1)
    if world == 1:
        return Dist()
    import torch.distributed as dist

    rank = launcher_int("RANK", None, 0, world - 1)
    local = launcher_int("LOCAL_RANK", 0, 0, world - 1)
    use_cuda = device_name != "cpu" and torch.cuda.is_available()
    if use_cuda:
        if local >= torch.cuda.device_count():
            raise ConfigError(f"LOCAL_RANK={local}: this machine has {torch.cuda.device_count()} "
                              f"GPU(s) ({LAUNCHER})")
        torch.cuda.set_device(local)
    owns = not dist.is_initialized()
    if owns:
        address = launcher_variable("MASTER_ADDR")  # where torch's rendezvous meets
        port = launcher_int("MASTER_PORT", None, 1, 65535)
        try:
            dist.init_process_group(backend="nccl" if use_cuda else "gloo")
        except (RuntimeError, ValueError) as e:
            raise NmtError(f"MASTER_ADDR={address}, MASTER_PORT={port}: cannot join the "
                           f"processes of the run ({first_line(e)})") from None
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
