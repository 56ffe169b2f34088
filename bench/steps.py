"""Real training steps outside ``nmt train``, for the benchmarks that time them
(:mod:`bench.gpu`'s speed step, :mod:`bench.precision`): the model, optimizer, schedule and
moving average a run builds, and :func:`nmt.training.loop.train_step` on batches of the
config's kind, with nothing written."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import ROOT


@dataclass
class TrainingSteps:
    """What :func:`training_steps` built; :meth:`step` trains on one batch."""

    cfg: Any  # nmt.config.Config
    prepared: Any  # nmt.data.prepare.Prepared
    state: Any  # nmt.training.state.TrainingState
    run: Any  # nmt.training.state.Run
    forward: Any
    collator: Any  # nmt.data.batching.Collator

    @property
    def split(self) -> Any:
        return self.prepared.splits["train"]

    def batches(self, size: int) -> list[Any]:
        """The training split in batches of ``size`` (the config's ``batch_by``), epoch 0."""
        from nmt.data.batching import make_batches

        t, split = self.cfg.train, self.split
        return make_batches(split.src_lengths(), split.tgt_lengths(), batch_size=size,
                            by=t.batch_by, shuffle=True, seed=t.seed, epoch=0,
                            pad_to_multiple=t.pad_to_multiple)

    def step(self, group: Any) -> tuple[float, int]:
        """One optimizer step (and the moving average's update): its summed loss and target
        tokens."""
        from nmt.training.loop import train_step

        _, loss, tokens = train_step(self.forward, self.state, [group], self.collator, self.run)
        if self.state.ema is not None:
            self.state.ema.update(self.state.model)
        return loss, tokens


def training_steps(cfg: Any, data_dir: Path, device: Any) -> TrainingSteps:
    """``cfg``'s prepared data (built if missing), and a freshly seeded model of it on
    ``device`` (a ``torch.device``) with what training it takes; torch's threads set to
    ``train.threads`` as ``nmt train`` sets them (``--set train.threads=1`` is one thread)."""
    import torch

    from nmt.data.batching import Collator
    from nmt.data.prepare import prepare
    from nmt.device import set_threads
    from nmt.models.build import build_model
    from nmt.runs.directory import MetricsLog
    from nmt.training.distributed import Dist
    from nmt.training.ema import ExponentialMovingAverage
    from nmt.training.loop import Display, Progress, Run, TrainingState, training_forward
    from nmt.training.optim import build_optimizer

    t = cfg.train
    set_threads(t.threads)
    prepared = prepare(cfg.data, data_dir, log=lambda s: None)
    tok = prepared.tokenizer
    torch.manual_seed(t.seed)
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size,
                        joint_vocab=tok.joint).to(device)
    optimizer, scheduler = build_optimizer(t, model)
    ema = ExponentialMovingAverage(model, t.ema_decay) if t.ema_decay else None
    state = TrainingState(model, optimizer, scheduler, ema, Progress())
    run = Run(cfg, ROOT, Dist(), device, prepared, MetricsLog(ROOT, enabled=False), {},
              Display(), elapsed0=0.0)
    return TrainingSteps(cfg, prepared, state, run, training_forward(model, t, Dist(), device),
                         Collator(prepared.splits["train"], truncate=cfg.data.truncate,
                                  pad_to_multiple=t.pad_to_multiple))


def demo_steps(overrides: list[str], steps: int, data_dir: Path) -> tuple[float, float]:
    """Target tokens/s (the first 3 steps not timed) and the mean per-token loss of ``steps``
    of ``configs/demo.toml``'s training steps on the CPU, with ``overrides`` (``key=value``)."""
    import statistics
    import time

    import torch

    from bench import CONFIGS
    from nmt.config import load_config

    cfg = load_config(CONFIGS / "demo.toml", ["train.device=cpu", *overrides])
    trainer = training_steps(cfg, data_dir, torch.device("cpu"))
    seconds, tokens, losses = 0.0, 0, []
    for i, group in enumerate(trainer.batches(cfg.train.batch_size)[:steps]):
        start = time.perf_counter()
        loss, n = trainer.step(group)
        if i >= 3:
            seconds += time.perf_counter() - start
            tokens += n
        losses.append(loss / n)
    return tokens / seconds, statistics.mean(losses)
