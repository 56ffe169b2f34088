"""What a training carries from step to step, and how its checkpoints save and restore it.

:class:`Progress` (where training stands), :class:`TrainingState` (what a step changes),
:class:`Run` (what the loop reads); :func:`open_run_dir` reads ``last.pt`` for ``--resume``,
:func:`restore` continues from it exactly (weights, optimizer, schedule, average, progress,
RNGs), :func:`save` writes ``last.pt``/``best.pt`` and :func:`save_config` ``config.toml``. The
loop itself is :mod:`nmt.training.loop`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.optim.lr_scheduler import LambdaLR

from nmt.config import Config, from_dict
from nmt.data.prepare import Prepared
from nmt.errors import CheckpointError, ConfigError, first_line
from nmt.files import atomic_write_text
from nmt.models.base import EncoderDecoder
from nmt.runs.checkpoint import (
    check_optimizer_state,
    check_tokenizer,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
    vocab_entry,
)
from nmt.runs.directory import (
    MetricsLog,
    adopt_newer_best,
    discard_previous_run,
    frozen_change,
    last_valid_step,
    start_run_dir,
    valid_loss_at,
)
from nmt.runs.layout import CONFIG_FILE, TOKENIZER_DIR
from nmt.runs.loading import check_weights, run_tokenizer
from nmt.runs.paths import checkpoint_path
from nmt.training.batches import ValidSet, epoch_batches
from nmt.training.distributed import Dist, barrier
from nmt.training.ema import ExponentialMovingAverage
from nmt.training.optim import use_config_hyperparameters


class Display:
    """What the loop shows while it runs. This one shows nothing; ``nmt train`` passes one that
    draws a progress bar (:class:`nmt.training.command.TerminalDisplay`)."""

    def step(self, epoch: int, step_in_epoch: int, steps_in_epoch: int,
             record: dict[str, Any] | None) -> None:
        """After every optimizer step; ``record`` is the metric line when one was written."""

    def validation(self, line: str) -> None:
        """After every validation, its one-line summary."""

    def note(self, line: str) -> None:
        """A line to show once while training (the time budget's estimate)."""

    def close(self) -> None:
        """When the loop ends."""


@dataclass
class Progress:
    """Where training stands; saved in every checkpoint so --resume continues exactly."""

    step: int = 0  # optimizer steps taken
    epoch: int = 0  # current epoch (0-based)
    batch_in_epoch: int = 0  # batches of the current epoch already consumed
    tokens: int = 0  # target tokens trained on
    elapsed: float = 0.0  # training seconds (wall clock, across resumes)
    best_score: float = -math.inf  # best validation score (BLEU, or -loss when BLEU is off)
    best_loss: float = math.inf  # validation loss at best_step: breaks ties of best_score
    best_step: int = 0
    evals_since_best: int = 0
    last_eval_step: int = -1  # step of the latest validation (-1: none yet)
    window_loss: float = 0.0  # loss sum and tokens since the last log line
    window_tokens: int = 0
    finished: bool = False
    stop_reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class TrainingState:
    """Everything a step changes: what a checkpoint saves, besides the RNG states."""

    model: EncoderDecoder
    optimizer: torch.optim.Optimizer
    scheduler: LambdaLR
    ema: ExponentialMovingAverage[EncoderDecoder] | None
    progress: Progress

    @property
    def scored(self) -> EncoderDecoder:
        """The weights validation scores: their moving average when there is one."""
        return self.ema.model if self.ema is not None else self.model


@dataclass
class Run:
    """What the loop reads but does not change (apart from the time of the latest save)."""

    cfg: Config
    run_dir: Path
    dist: Dist
    device: torch.device
    prepared: Prepared
    mlog: MetricsLog
    # the held-out sets validation scores, by name: the run's own valid split ("valid") chooses
    # best.pt; any other is recorded beside it (on rank 0 only)
    valid_sets: dict[str, ValidSet]
    display: Display
    elapsed0: float  # training seconds before this invocation (from the checkpoint)
    started: float = field(default_factory=time.perf_counter)
    last_save: float = field(default_factory=time.perf_counter)
    config_saved: bool = False  # config.toml holds cfg
    hardware: dict[str, Any] = field(default_factory=dict)  # what it trains on, as saved

    def clock(self) -> float:
        """Training seconds so far, across resumes."""
        return self.elapsed0 + time.perf_counter() - self.started


def open_run_dir(run_dir: Path, cfg: Config, dist: Dist, resume: bool,
                 overwrite: bool) -> dict[str, Any] | None:
    """Create (or, resuming, check) the run directory; returns ``last.pt`` when resuming.

    Read before the data is prepared: its config must be the checkpoint's.
    """
    if dist.main:
        start_run_dir(run_dir, resume, overwrite)
        if resume:
            adopt_newer_best(run_dir)
    barrier(dist)
    if not resume:
        return None
    path = checkpoint_path(run_dir)
    saved = load_checkpoint(path, map_location="cpu", folder=run_dir)
    trained = from_dict(saved["config"], where=f"{run_dir} checkpoint", saved=True)
    change = frozen_change(cfg, trained)
    if change is not None:
        raise ConfigError(f"{path}: {change[1]}")
    check_weights(path, trained, saved["vocab"], saved["model"])  # before building the model
    return saved


def restore(run: Run, state: TrainingState, saved: dict[str, Any]) -> None:
    """Continue from ``last.pt``: weights, optimizer, schedule, average, progress, RNGs.

    Only with the tokenizer the weights were trained with: the data cache's (whose ids training
    goes on with) and the run's own (whose ids translation will decode) must both be it."""
    t, where = run.cfg.train, str(checkpoint_path(run.run_dir))
    check_tokenizer(Path(where), saved["vocab"], run_tokenizer(run.run_dir),
                    str(run.run_dir / TOKENIZER_DIR))
    check_tokenizer(Path(where), saved["vocab"], run.prepared.tokenizer,
                    f"the data cache {run.prepared.cache_dir}")
    try:
        state.model.load_state_dict(saved["model"])
        state.optimizer.load_state_dict(saved["optimizer"])
        check_optimizer_state(Path(where), state.optimizer)
        state.scheduler.load_state_dict(saved["scheduler"])
        use_config_hyperparameters(state.optimizer, state.scheduler, t)
        if state.ema is not None:
            if "ema" in saved:
                state.ema.load_state_dict(saved["ema"])
            else:  # a run started without an average starts one from its weights now
                state.ema = ExponentialMovingAverage(state.model, t.ema_decay)
        prog = state.progress = Progress(**saved["progress"])
        # fields a checkpoint written before they existed leaves out, from metrics.jsonl
        if "last_eval_step" not in saved["progress"]:
            prog.last_eval_step = last_valid_step(run.run_dir, prog.step)
        if "best_loss" not in saved["progress"] and prog.best_step:
            prog.best_loss = valid_loss_at(run.run_dir, prog.best_step)
        rng = saved["rng"]
        set_rng_state(rng[run.dist.rank] if isinstance(rng, list) else rng)
    except (KeyError, ValueError, RuntimeError, TypeError, IndexError) as e:
        raise CheckpointError(f"{where}: cannot resume ({type(e).__name__}: {first_line(e)})"
                              ) from None
    if prog.batch_in_epoch and prog.batch_in_epoch >= len(epoch_batches(run.prepared, t,
                                                                        run.dist, prog.epoch)):
        prog.epoch, prog.batch_in_epoch = prog.epoch + 1, 0  # saved at an epoch's end (older)
    prog.finished, prog.stop_reason = False, ""  # new limits (--set) may allow more steps
    run.elapsed0 = prog.elapsed
    run.mlog.truncate_after(prog.step, prog.last_eval_step)


def save(run: Run, state: TrainingState, *names: str) -> None:
    """Write ``checkpoints/NAME.pt`` for each name (rank 0). Every rank must call it together:
    it gathers the ranks' RNG states."""
    run.last_save = time.perf_counter()
    state.progress.elapsed = run.clock()
    rng = gathered_rng_states(run.dist)
    if not run.dist.main:
        return
    payload = {
        "config": run.cfg.to_dict(),
        "vocab": vocab_entry(run.prepared.tokenizer),
        "model": state.model.state_dict(),
        "optimizer": state.optimizer.state_dict(),
        "scheduler": state.scheduler.state_dict(),
        "rng": rng,
        "progress": state.progress.as_dict(),
    }
    if state.ema is not None:
        payload["ema"] = state.ema.state_dict()
    if run.hardware:
        payload["hardware"] = run.hardware
    for name in names:
        save_checkpoint(checkpoint_path(run.run_dir, name), payload)
    save_config(run)
    discard_previous_run(run.run_dir)  # what --overwrite replaced: this run now has a checkpoint


def save_config(run: Run) -> None:
    """Write ``config.toml`` (rank 0), once an invocation: a new run at its start, a resume
    right after its first checkpoint, so a resume that fails before it saves anything leaves
    the run's config as it was (and the config always describes ``last.pt``)."""
    if run.dist.main and not run.config_saved:
        atomic_write_text(run.run_dir / CONFIG_FILE, run.cfg.to_toml())
    run.config_saved = True


def gathered_rng_states(dist: Dist) -> Any:
    """This process's RNG states; under several processes, the list of every rank's."""
    if dist.world_size == 1:
        return rng_state()
    import torch.distributed as tdist

    # Tensors inside all_gather_object do not round-trip: send numpy arrays instead.
    states: list[Any] = [None] * dist.world_size
    tdist.all_gather_object(states, _map_tensors(rng_state(), lambda x: x.numpy()))
    return [_map_tensors(s, torch.from_numpy, np.ndarray) for s in states]


def _map_tensors(x: Any, fn: Callable[[Any], Any], kind: type = torch.Tensor) -> Any:
    """Apply ``fn`` to every ``kind`` leaf of nested dicts/lists/tuples."""
    if isinstance(x, kind):
        return fn(x)
    if isinstance(x, dict):
        return {k: _map_tensors(v, fn, kind) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_map_tensors(v, fn, kind) for v in x)
    return x
