"""Where a training step's time goes: ``python -m bench.profile_step CONFIG [--device cuda]``.

Runs real training steps (:mod:`bench.steps`: :func:`nmt.training.loop.train_step` and the
moving average) of a config and reports, per step:

- ``wall_s``: the step as training runs it, unsynchronised, the device drained once at the end
  of the timed steps (what ``nmt train`` sees);
- ``device_busy_s`` (CUDA only): the summed time of the GPU's kernels and copies in those steps,
  from :mod:`torch.profiler`; ``wall_s`` well above it means the GPU waits on the host;
- ``collate_s``: assembling the step's batches from token ids on the CPU (the collator alone);
- the operators that take the most host time (``self_cpu``) and the most device time
  (``self_device``), and how many kernels a step launches;
- with ``--copies``, where the step's copies come from (``copies``): on CUDA its
  device-to-device copies (``Memcpy DtoD`` on the device), on a CPU every ``aten::copy_``,
  grouped by the operators that made them (a backward function's name for copies autograd
  makes) and the function of nmt's code that ran them (as the profiler names it, with the line
  it is defined on), with calls and time a step. Python's stack is recorded for this, which
  slows the profiled steps (not the timed ones), so their times are shares, not a pace.

Prints one JSON object; ``--table`` prints the profiler's tables as well. The figures of a
CPU run say where the CPU's time goes; on CUDA, whether the host or the GPU sets the pace.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nmt.errors import NmtError


def profile(config: Path, device_name: str = "cuda", steps: int = 10, warmup: int = 5,
            data_dir: Path | None = None, overrides: Sequence[str] = (),
            top: int = 12, table: bool = False, copies: bool = False) -> dict[str, Any]:
    """Profile ``steps`` training steps of ``config`` on ``device_name`` after ``warmup``."""
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from bench.steps import training_steps
    from nmt.config import load_config
    from nmt.data.download import default_data_dir

    if steps < 1 or warmup < 0:
        raise NmtError(f"--steps {steps} / --warmup {warmup}: expected steps >= 1, warmup >= 0")
    cfg = load_config(config, [f"train.device={device_name}", *overrides])
    device = torch.device(device_name)
    cuda = device.type == "cuda"
    if cuda and not torch.cuda.is_available():
        raise NmtError("--device cuda: no CUDA device is visible")
    trainer = training_steps(cfg, data_dir or default_data_dir(), device)
    listed = trainer.batches(cfg.train.batch_size)
    chosen = [listed[i % len(listed)] for i in range(warmup + 2 * steps)]

    def drain() -> None:
        if cuda:
            torch.cuda.synchronize()

    for group in chosen[:warmup]:
        trainer.step(group)
    drain()
    # Unprofiled: the step's own pace.
    tokens = 0
    start = time.perf_counter()
    for group in chosen[warmup:warmup + steps]:
        tokens += trainer.step(group)[1]
    drain()
    wall = (time.perf_counter() - start) / steps
    collate = []
    for group in chosen[warmup:warmup + steps]:
        begin = time.perf_counter()
        trainer.collator(group)
        collate.append(time.perf_counter() - begin)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with torch_profile(activities=activities, with_stack=copies) as prof:
        for group in chosen[warmup + steps:]:
            trainer.step(group)
        drain()
    averages = prof.key_averages()

    def device_us(e: Any) -> float:
        return float(e.self_device_time_total)

    cpu_total = max(sum(e.self_cpu_time_total for e in averages), 1e-9)
    rows = [{"op": e.key, "calls": e.count / steps,
             "self_cpu_ms": round(e.self_cpu_time_total / steps / 1000, 3),
             # the operator's share of the host's time: steadier than milliseconds on a busy
             # machine, where every operator slows alike
             "self_cpu_share": round(e.self_cpu_time_total / cpu_total, 4),
             "self_device_ms": round(device_us(e) / steps / 1000, 3)} for e in averages]
    on_device = [e for e in averages if e.device_type == torch.autograd.DeviceType.CUDA]
    busy = sum(device_us(e) for e in on_device)  # kernels, copies and sets, one stream
    result: dict[str, Any] = {
        "config": str(config), "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "precision": cfg.train.precision, "batch_size": cfg.train.batch_size,
        "steps": steps, "warmup": warmup,
        "wall_s": round(wall, 4), "target_tokens_per_s": round(tokens / (wall * steps)),
        "collate_s": round(statistics.median(collate), 6),
        "device_busy_s": round(busy / steps / 1e6, 4) if cuda else None,
        "kernels_per_step": round(sum(e.count for e in on_device) / steps) if cuda else None,
        "self_cpu": sorted(rows, key=lambda r: -r["self_cpu_ms"])[:top],
        "self_device": (sorted(rows, key=lambda r: -r["self_device_ms"])[:top] if cuda
                        else []),
    }
    if copies:
        result["copies"] = copy_origins(prof.events(), steps, cuda)[:top]
    if table:
        sort = "self_cuda_time_total" if cuda else "self_cpu_time_total"
        print(averages.table(sort_by=sort, row_limit=top * 2), file=sys.stderr)
    return result


OWN_CODE = re.compile(r"^(nmt|bench)/.+\(\d+\): ")  # a Python function of nmt's, as the
# profiler names it with_stack: "nmt/models/gru.py(123): step", 123 the line of its def


def _origin(event: Any) -> str:
    """Where ``event`` (a copy) comes from: the operators above it, innermost first, up to the
    first that is not an ATen operator (a backward function, a Python call), and the innermost
    function of nmt's code above that (none for the copies autograd makes in a backward
    pass)."""
    names: list[str] = []
    node = event.cpu_parent
    while node is not None and len(names) < 4:
        names.append(node.name.replace("autograd::engine::evaluate_function: ", ""))
        if not node.name.startswith("aten::"):
            break
        node = node.cpu_parent
    line = ""
    while node is not None and not node.name.startswith("autograd::engine"):
        if OWN_CODE.match(node.name):
            line = node.name
            break
        node = node.cpu_parent
    return " < ".join(names or ["(top level)"]) + (f" in {line}" if line else "")


def copy_origins(events: Sequence[Any], steps: int, cuda: bool) -> list[dict[str, Any]]:
    """The profiled steps' copies grouped by :func:`_origin`, most time first: on CUDA the
    device-to-device copies each operator launched (their device time), on a CPU the
    ``aten::copy_`` calls (their own host time)."""
    calls: dict[str, int] = {}
    micros: dict[str, float] = {}
    for e in events:
        if cuda:
            found = [k for k in getattr(e, "kernels", []) if "DtoD" in k.name]
            if not found:
                continue
            n, us = len(found), float(sum(k.duration for k in found))
        elif e.name == "aten::copy_":
            n, us = 1, float(e.self_cpu_time_total)
        else:
            continue
        where = _origin(e)
        calls[where] = calls.get(where, 0) + n
        micros[where] = micros.get(where, 0.0) + us
    return [{"where": w, "calls": round(calls[w] / steps, 1),
             ("device_ms" if cuda else "self_cpu_ms"): round(micros[w] / steps / 1000, 3)}
            for w in sorted(micros, key=lambda w: -micros[w])]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.profile_step", description=__doc__)
    p.add_argument("config", type=Path)
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--data-dir", type=Path, default=None)
    p.add_argument("--set", action="append", default=[], help="section.key=value")
    p.add_argument("--top", type=int, default=12)
    p.add_argument("--copies", action="store_true", help="also say where the step's copies "
                   "come from (device-to-device on CUDA)")
    p.add_argument("--table", action="store_true", help="also print the profiler's table "
                   "(stderr)")
    args = p.parse_args(argv)
    try:
        result = profile(args.config, args.device, args.steps, args.warmup, args.data_dir,
                         args.set, args.top, args.table, args.copies)
    except NmtError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
