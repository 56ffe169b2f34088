"""What keeping freed memory buys a training process (:mod:`nmt.training.keep_freed_memory`).

``python -m bench.freed_memory [--config configs/demo.toml] [--threads 1] [--steps 200]
[--repeats 4] [--set KEY=VALUE ...]``: trains ``--steps`` steps of the config in a fresh process
with glibc's ``malloc`` as it comes and in one with the trick applied, ``--repeats`` pairs, the
side that starts alternating from pair to pair; each process reports its target tokens/s (the
first 10 steps not timed), page faults a step and peak resident memory. Prints each pair and
the median of the pairs' speed ratios. The trick is process-wide, so the sides cannot share a
process as :mod:`bench.ab`'s do. Pin it to one CPU (``taskset -c 1``) for one thread, on a quiet
machine; the config's data must be prepared (``nmt data prepare``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench import ROOT

UNTIMED = 10  # first steps of each process, not timed


def child(config: Path, overrides: list[str], steps: int, keep: bool,
          data_dir: Path | None) -> dict[str, Any]:
    """In this process: the trick applied or not, then ``steps`` training steps of ``config``."""
    import resource
    import time

    import torch

    from bench.steps import training_steps
    from nmt.config import load_config
    from nmt.data.download import default_data_dir
    from nmt.training.keep_freed_memory import keep_freed_memory

    applied = keep_freed_memory() if keep else False
    cfg = load_config(config, ["train.device=cpu", *overrides])
    torch.set_num_threads(cfg.train.threads)
    trainer = training_steps(cfg, data_dir or default_data_dir(), torch.device("cpu"))
    batches = trainer.batches(cfg.train.batch_size)[:steps]
    if len(batches) <= UNTIMED:
        raise SystemExit(f"error: --steps: expected more than {UNTIMED}, got {len(batches)}")

    def faults() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

    seconds, tokens, faulted = 0.0, 0, 0
    for i, batch in enumerate(batches):
        before, start = faults(), time.perf_counter()
        _, n = trainer.step(batch)
        if i >= UNTIMED:
            seconds += time.perf_counter() - start
            tokens += n
            faulted += faults() - before
    timed = len(batches) - UNTIMED
    return {"applied": applied, "tokens_per_s": tokens / seconds,
            "faults_per_step": faulted / timed,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def run_side(args: argparse.Namespace, keep: bool) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.freed_memory", "--child", "keep" if keep else "as-is",
               "--config", str(args.config), "--steps", str(args.steps)]
    command += [f"--set={o}" for o in args.set] + ["--threads", str(args.threads)]
    if args.data_dir:
        command += ["--data-dir", str(args.data_dir)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(done.stderr.strip().splitlines()[-1] if done.stderr.strip()
                         else f"error: the child exited with {done.returncode}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.freed_memory", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", type=Path, default=ROOT / "configs" / "demo.toml")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--repeats", type=int, default=4)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--data-dir", type=Path, default=None)
    p.add_argument("--child", choices=("keep", "as-is"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.threads < 1 or args.repeats < 1:
        p.error("--threads and --repeats must be at least 1")
    overrides = [f"train.threads={args.threads}", *args.set]
    if args.child:
        print(json.dumps(child(args.config, overrides, args.steps, args.child == "keep",
                               args.data_dir)))
        return
    from bench.machine import machine

    info = machine()
    print(f"{info.get('cpu')}; {args.threads} thread(s); commit {info.get('commit')}; "
          f"{args.config.name} {args.set or ''}, {args.steps} steps a process", flush=True)
    ratios = []
    for r in range(args.repeats):
        order = (False, True) if r % 2 == 0 else (True, False)
        sides = {keep: run_side(args, keep) for keep in order}
        kept, as_is = sides[True], sides[False]
        ratios.append(kept["tokens_per_s"] / as_is["tokens_per_s"])
        print(f"pair {r}: as it comes {as_is['tokens_per_s']:,.0f} target tokens/s, "
              f"{as_is['faults_per_step']:,.0f} page faults a step, peak "
              f"{as_is['peak_rss_mb']:,.0f} MB; kept {kept['tokens_per_s']:,.0f}, "
              f"{kept['faults_per_step']:,.0f}, {kept['peak_rss_mb']:,.0f} MB"
              f"{'' if kept['applied'] else ' (not applied here)'}; ratio {ratios[-1]:.3f}",
              flush=True)
    print(f"kept / as it comes, median of {len(ratios)} pairs: {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
