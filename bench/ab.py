"""Two settings of a config's training step, timed against each other on the same batches.

``python -m bench.ab --b train.compile=true [--a KEY=VALUE ...] [--config configs/demo.toml]
[--set KEY=VALUE ...] [--threads 1] [--warmup 5] [--block 15] [--rounds 5]``

Builds the config's model twice, identically seeded, once with the ``--a`` overrides and once
with the ``--b`` ones (``--set`` applies to both), and trains each on the same batches of the
training split (epoch 0): ``--warmup`` steps each first (where a compiled side compiles), then
``--rounds`` rounds of ``--block`` steps a side, the side that starts alternating from round to
round, so the drift of a shared machine falls on both. Prints each round's target tokens/s and
the ratio B / A, then the median of the rounds' ratios: the figure to quote, since the rounds'
absolute speeds move with the machine. Pin it to one CPU (``taskset -c 1``) for one thread, and
run it on a quiet machine; the config's data must be prepared (``nmt data prepare``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

Step = Callable[[Any], int]  # trains on one batch, returns its target tokens


def alternate(sides: dict[str, Step], batches: Sequence[Any], *, block: int, rounds: int,
              clock: Callable[[], float] = time.perf_counter) -> list[dict[str, float]]:
    """Target tokens/s of each side, per round: round ``r`` gives both sides batches
    ``r * block`` to ``(r + 1) * block``, the first side first in even rounds, last in odd ones."""
    names = list(sides)
    if len(batches) < rounds * block:
        raise ValueError(f"{rounds} rounds of {block} steps need {rounds * block} batches, "
                         f"got {len(batches)}")
    results = []
    for r in range(rounds):
        group = batches[r * block:(r + 1) * block]
        speeds: dict[str, float] = {}
        for name in names if r % 2 == 0 else names[::-1]:
            seconds, tokens = 0.0, 0
            for batch in group:
                start = clock()
                tokens += sides[name](batch)
                seconds += clock() - start
            speeds[name] = tokens / seconds
        results.append(speeds)
    return results


def median_ratio(rounds: list[dict[str, float]], b: str = "B", a: str = "A") -> float:
    """The median over rounds of side ``b``'s speed over side ``a``'s."""
    return statistics.median(r[b] / r[a] for r in rounds)


def options(prog: str, doc: str | None) -> argparse.ArgumentParser:
    """The options every alternated A/B of training steps takes (this module's, and
    :mod:`bench.chunked_loss`'s)."""
    p = argparse.ArgumentParser(prog=prog, description=doc,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", type=Path, default=None, help="default: configs/demo.toml")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--block", type=int, default=15)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--data-dir", type=Path, default=None)
    return p


def checked(p: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """The parsed options, the counts checked."""
    args = p.parse_args(argv)
    if min(args.threads, args.block, args.rounds) < 1 or args.warmup < 0:
        p.error("--threads, --block and --rounds must be at least 1, --warmup at least 0")
    return args


def compare(sides: dict[str, Step], batches: Sequence[Any], args: argparse.Namespace) -> None:
    """Warm both sides up, alternate them over the rest of ``batches`` and print each round and
    the median of the ratios B / A."""
    for side, step in sides.items():
        start = time.perf_counter()
        for batch in batches[:args.warmup]:
            step(batch)
        print(f"{side}: {args.warmup} warm-up steps, {time.perf_counter() - start:.1f} s",
              flush=True)
    try:
        rounds = alternate(sides, batches[args.warmup:], block=args.block, rounds=args.rounds)
    except ValueError as e:
        raise SystemExit(f"error: --rounds/--block: {e}") from None
    for i, r in enumerate(rounds):
        print(f"round {i}: A {r['A']:,.0f}, B {r['B']:,.0f} target tokens/s, "
              f"B / A {r['B'] / r['A']:.3f}")
    print(f"B / A, median of {len(rounds)} rounds: {median_ratio(rounds):.3f}")


def main(argv: list[str] | None = None) -> None:
    p = options("python -m bench.ab", __doc__)
    p.add_argument("--a", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--b", action="append", default=[], metavar="KEY=VALUE")
    args = checked(p, argv)
    import torch

    from bench import CONFIGS
    from bench.machine import machine
    from bench.steps import training_steps
    from nmt.config import load_config
    from nmt.data.download import default_data_dir
    from nmt.errors import NmtError

    torch.set_num_threads(args.threads)
    config = args.config or CONFIGS / "demo.toml"
    common = ["train.device=cpu", f"train.threads={args.threads}", *args.set]
    data_dir = args.data_dir or default_data_dir()
    try:
        trainers = {side: training_steps(load_config(config, [*common, *over]), data_dir,
                                         torch.device("cpu"))
                    for side, over in (("A", args.a), ("B", args.b))}
    except NmtError as e:
        raise SystemExit(f"error: {e}") from None
    a = trainers["A"]
    batches = a.batches(a.cfg.train.batch_size)
    info = machine()
    print(f"{info.get('cpu')}; torch {torch.__version__}, {args.threads} thread(s); commit "
          f"{info.get('commit')}; {config.name}; A: {args.a or 'as configured'}; "
          f"B: {args.b or 'as configured'}", flush=True)

    def stepper(side: str) -> Step:
        return lambda batch: trainers[side].step(batch)[1]

    compare({"A": stepper("A"), "B": stepper("B")}, batches, args)


if __name__ == "__main__":
    main()
