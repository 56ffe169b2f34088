"""The training loss as one function on the CPU against its readable form, alternated in one
process: ``python -m bench.fused_loss [--steps 80] [--rounds 3] [--threads 2] [--set k=v]``.

The demo's real training steps (:mod:`bench.steps`: the same seeded model and batches each
time), with :mod:`nmt.training.fused_cross_entropy` switched off and on in turn; prints the
target tokens/s (the first 3 steps not timed) and mean training loss of each run, then the
medians and their ratio. Run ``nmt data prepare --config configs/demo.toml`` first.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.fused_loss", description=__doc__)
    p.add_argument("--steps", type=int, default=80)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--set", action="append", default=[], help="section.key=value")
    p.add_argument("--data-dir", type=Path, default=None)
    args = p.parse_args(argv)
    import torch

    import nmt.training.fused_cross_entropy as fused
    from bench.machine import machine
    from bench.steps import demo_steps
    from nmt.data.download import default_data_dir

    torch.set_num_threads(args.threads)
    info: dict[str, Any] = machine()
    print(f"{info.get('cpu')}; torch {torch.__version__}, {args.threads} threads; "
          f"commit {info.get('commit')}; {' '.join(args.set) or 'demo.toml as it is'}")
    applies = fused.applies
    speeds: dict[str, list[float]] = {"readable": [], "one function": []}
    try:
        for _ in range(args.rounds):
            for name, rule in (("readable", lambda logits: False), ("one function", applies)):
                fused.applies = rule  # type: ignore[assignment]
                per_s, loss = demo_steps(args.set, args.steps,
                                          args.data_dir or default_data_dir())
                speeds[name].append(per_s)
                print(f"{name}: {per_s:,.0f} target tokens/s, mean loss {loss:.5f}", flush=True)
    finally:
        fused.applies = applies  # type: ignore[assignment]
    medians = {name: statistics.median(v) for name, v in speeds.items()}
    print(f"medians: readable {medians['readable']:,.0f}, one function "
          f"{medians['one function']:,.0f} target tokens/s: "
          f"{medians['one function'] / medians['readable']:.3f}x")


if __name__ == "__main__":
    main()
