"""fp32 against bf16 autocast on this CPU: the demo's real training steps, alternated.

``python -m bench.precision [--steps 120] [--repeats 2] [--threads 2]``: the same seeded model
and the same batches of ``configs/demo.toml`` (its prepared data: run ``nmt data prepare
--config configs/demo.toml`` first), trained ``--steps`` steps in fp32 and in bf16 autocast,
in turn, ``--repeats`` times; prints target tokens/s (the first 3 steps not timed) and the
mean training loss of each. What ``train.precision = "auto"`` decides from
(:func:`nmt.device.cpu_bf16_units`) is printed first. A few hundred steps say more than the
default: what slows bf16 over a run (oneDNN's kept kernels, :func:`nmt.device.bound_kernel_cache`)
shows only after the first hundred.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.precision", description=__doc__)
    p.add_argument("--steps", type=int, default=120)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--data-dir", type=Path, default=None)
    args = p.parse_args(argv)
    import torch

    from bench.machine import machine
    from bench.steps import demo_steps
    from nmt.data.download import default_data_dir
    from nmt.device import cpu_bf16_units

    torch.set_num_threads(args.threads)
    info: dict[str, Any] = machine()
    print(f"{info.get('cpu')}; bf16 units: {cpu_bf16_units() or 'none'}; torch "
          f"{torch.__version__}, {args.threads} threads; commit {info.get('commit')}")
    for _ in range(args.repeats):
        for precision in ("fp32", "bf16"):
            per_s, loss = demo_steps([f"train.precision={precision}"], args.steps,
                                      args.data_dir or default_data_dir())
            print(f"{precision}: {per_s:,.0f} target tokens/s, mean loss {loss:.4f}",
                  flush=True)


if __name__ == "__main__":
    main()
