"""What a cheaper dropout mask could save on the CPU, alternated in one process: ``python -m
bench.dropout_masks [--threads 1] [--rounds 60] [--rows 3000] [--cols 512] [--p 0.1]``.

Times three ways of dropping a share ``p`` of a ``rows`` x ``cols`` float tensor (the demo's
largest dropout: 3,000 target positions x its 512-wide feed-forward layer), each round once
each, in turn: ``bernoulli_`` (the mask nmt and OpenNMT-py draw), ``F.dropout``, and a mask
from 16-bit pieces of torch's own 32-bit draws (``random_`` over the int32 range, viewed as
int16, compared with ``p`` x 65,536: the same generator, so exact resume would hold). Prints
each way's median milliseconds and ``bernoulli_``'s over it. Pin it to one CPU (``taskset -c
1``) for one thread, and run it on a quiet machine. docs/BENCHMARKS.md, "Tried and dropped".
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.dropout_masks", description=__doc__)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=60)
    p.add_argument("--rows", type=int, default=3000)
    p.add_argument("--cols", type=int, default=512)
    p.add_argument("--p", type=float, default=0.1)
    args = p.parse_args(argv)
    import torch

    from bench.machine import machine

    torch.set_num_threads(args.threads)
    x, drop = torch.randn(args.rows, args.cols), args.p
    threshold = int(-32768 + round(drop * 65536))

    def bernoulli() -> torch.Tensor:
        return x * torch.empty_like(x).bernoulli_(1 - drop).div_(1 - drop)

    def sixteen_bits() -> torch.Tensor:
        draws = torch.empty(x.numel() // 2 + 1, dtype=torch.int32).random_(-2**31, 2**31)
        keep = draws.view(torch.int16)[:x.numel()].view(x.shape) >= threshold
        return x * keep * (1 / (1 - drop))

    ways: dict[str, Callable[[], torch.Tensor]] = {
        "bernoulli_": bernoulli,
        "F.dropout": lambda: torch.nn.functional.dropout(x, drop, True),
        "16-bit pieces": sixteen_bits,
    }
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    for way in ways.values():
        way()  # warm
    for _ in range(args.rounds):
        for name, way in ways.items():
            start = time.perf_counter()
            way()
            seconds[name].append(time.perf_counter() - start)
    stamp = ", ".join(f"{key} {value}" for key, value in machine().items())
    print(f"{stamp}\n{args.threads} thread(s), {args.rows} x {args.cols} floats, p = {drop}, "
          f"medians of {args.rounds}")
    base = statistics.median(seconds["bernoulli_"])
    for name, taken in seconds.items():
        median = statistics.median(taken)
        print(f"  {name:14s} {median * 1e3:7.2f} ms   bernoulli_ / it: {base / median:.2f}x")


if __name__ == "__main__":
    main()
