"""fp32 against bf16 autocast on this CPU: the demo's real training steps, alternated.

``python -m bench.precision [--steps 120] [--repeats 2] [--threads 2]``: the same seeded model
and the same batches of ``configs/demo.toml`` (its prepared data: run ``nmt data prepare
--config configs/demo.toml`` first), trained ``--steps`` steps in fp32 and in bf16 autocast,
in turn, ``--repeats`` times; prints target tokens/s (the first 3 steps not timed) and the
mean training loss of each. What ``train.precision = "auto"`` decides from
(:func:`nmt.device.cpu_bf16_units`) is printed first.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from bench import CONFIGS


def train_steps(precision: str, steps: int, data_dir: Path) -> tuple[float, float]:
    """Target tokens/s and the mean per-token loss of ``steps`` demo steps in ``precision``."""
    import torch

    from nmt.config import load_config
    from nmt.data.batching import Collator, make_batches
    from nmt.data.prepare import prepare
    from nmt.models.build import build_model
    from nmt.runs.directory import MetricsLog
    from nmt.training.distributed import Dist
    from nmt.training.loop import (
        Display,
        Progress,
        Run,
        TrainingState,
        train_step,
        training_forward,
    )
    from nmt.training.optim import build_optimizer

    cfg = load_config(CONFIGS / "demo.toml", ["train.device=cpu",
                                              f"train.precision={precision}"])
    prepared = prepare(cfg.data, data_dir, log=lambda s: None)
    split, tok = prepared.splits["train"], prepared.tokenizer
    batches = make_batches(split.src_lengths(), split.tgt_lengths(),
                           batch_size=cfg.train.batch_size, by=cfg.train.batch_by, shuffle=True,
                           seed=cfg.train.seed, epoch=0)[:steps]
    torch.manual_seed(cfg.train.seed)
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size, joint_vocab=tok.joint)
    optimizer, scheduler = build_optimizer(cfg.train, model)
    state = TrainingState(model, optimizer, scheduler, None, Progress())
    cpu = torch.device("cpu")
    run = Run(cfg, Path("."), Dist(), cpu, prepared, MetricsLog(Path("."), enabled=False), [],
              Display(), elapsed0=0.0)
    forward = training_forward(model, cfg.train, Dist(), cpu)
    collator = Collator(split, truncate=cfg.data.truncate)
    seconds, tokens, losses = 0.0, 0, []
    for i, group in enumerate(batches):
        start = time.perf_counter()
        _, loss, n = train_step(forward, state, [group], collator, run)
        if i >= 3:
            seconds += time.perf_counter() - start
            tokens += n
        losses.append(loss / n)
    return tokens / seconds, statistics.mean(losses)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.precision", description=__doc__)
    p.add_argument("--steps", type=int, default=120)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--data-dir", type=Path, default=None)
    args = p.parse_args(argv)
    import torch

    from bench.machine import machine
    from nmt.data.download import default_data_dir
    from nmt.device import cpu_bf16_units

    torch.set_num_threads(args.threads)
    info: dict[str, Any] = machine()
    print(f"{info.get('cpu')}; bf16 units: {cpu_bf16_units() or 'none'}; torch "
          f"{torch.__version__}, {args.threads} threads; commit {info.get('commit')}")
    for _ in range(args.repeats):
        for precision in ("fp32", "bf16"):
            per_s, loss = train_steps(precision, args.steps, args.data_dir or default_data_dir())
            print(f"{precision}: {per_s:,.0f} target tokens/s, mean loss {loss:.4f}",
                  flush=True)


if __name__ == "__main__":
    main()
