"""The training loop: data, model, optimisation, validation, checkpoints, exact resume.

:func:`train` reads top to bottom. Set-up (:func:`set_up`): the device, the run directory, the
data, the model and its optimizer as the run's :class:`~nmt.training.finetune.Start` says
(decided before the loop: from scratch, or from another run's weights and tokenizer), or all of
their state from ``last.pt`` with ``--resume``, and the named held-out sets. Then one
optimizer step after another: batch -> loss -> backward -> step -> maybe validate (which
saves) -> maybe stop. :func:`stop_reason` holds every rule that ends a run; a run that ends
other than by a signal is validated and saved a last time. A signal saves ``last.pt`` at once;
a validation due at that step is done by the resume before its first step
(:func:`~nmt.training.validation.validation_owed`), so an interrupted and resumed run is the
uninterrupted one.

Its parts: :mod:`nmt.training.state` (the state a step changes, its checkpoints, the exact
resume), :mod:`nmt.training.batches` (the cache and the order of the batches),
:mod:`nmt.training.step` (one optimizer step and its loss), :mod:`nmt.training.validation`
(validation, the best weights, the end of a run).

It runs on the CPU, one GPU (bf16 autocast) or several GPUs under ``torchrun``
(DistributedDataParallel; only rank 0 writes files, and only decisions all ranks share end
the loop). What a terminal shows meanwhile is the caller's (:mod:`nmt.training.command`).
"""

from __future__ import annotations

import math
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from nmt.config import Config, TrainConfig
from nmt.data.batching import Collator
from nmt.data.prepare import Prepared
from nmt.device import (
    hardware,
    precision_said,
    resolve_device,
    separate_compiled_kernels,
    set_threads,
)
from nmt.errors import ConfigError
from nmt.files import atomic_write_text
from nmt.models.build import build_model, count_parameters
from nmt.runs.directory import (
    MetricsLog,
    anchored_config,
    no_empty_run_dir_left,
    previous_run_kept,
    run_lock,
)
from nmt.runs.layout import TOKENIZER_DIR
from nmt.runs.paths import checkpoint_path
from nmt.runs.records import hardware_record, write_corpus_record, write_excluded
from nmt.runs.time_budget import time_budget_reason
from nmt.training.batches import batch_groups, prepare_data, valid_sets
from nmt.training.cost import training_flops_per_target_token
from nmt.training.distributed import (
    Dist,
    all_reduce_sum,
    any_rank,
    end_distributed,
    init_distributed,
)
from nmt.training.ema import ExponentialMovingAverage
from nmt.training.finetune import Start, run_start
from nmt.training.optim import build_optimizer
from nmt.training.state import (
    Display,
    Progress,
    Run,
    TrainingState,
    open_run_dir,
    restore,
    save,
    save_config,
)
from nmt.training.step import (
    account,
    masked_cross_entropy,
    non_finite_loss,
    train_step,
    training_loss,
)
from nmt.training.validation import (
    finish,
    score_start,
    validate,
    validation_due,
    validation_owed,
)


@dataclass
class TrainResult:
    run_dir: Path
    progress: Progress
    # per-token cross-entropy (no label smoothing) of this invocation's steps (first_step to
    # progress.step; a resumed run's earlier steps are not in it), all ranks
    train_loss: float
    tokens_per_sec: float
    device: str
    tokens: int = 0  # target tokens trained on in this invocation, all ranks
    first_step: int = 1  # the first step this invocation took
    main: bool = True  # rank 0 (the process that reports)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    signal: int = 0  # the signal (SIGINT, SIGTERM) that stopped training early, else 0
    # training FLOPs per target token (nmt.training.cost) at the training split's mean lengths
    flops_per_token: float = 0.0
    # the time budget stopped the run short of its max_steps or epochs: what to say beside its
    # scores ("stopped at step 812 of 2,000 (train.max_minutes = 20): ..."), else None
    cut_short: str | None = None


class StopFlag:
    """Ctrl-C or SIGTERM asks the loop to stop after the current step and save ``last.pt``.

    A second Ctrl-C interrupts at once.
    """

    def __init__(self) -> None:
        self.requested = False
        self.signum = 0  # the signal that asked to stop (0: none, or asked by check())

    def check(self, step: int) -> bool:
        """Asked after every optimizer step: should training stop here?"""
        return self.requested

    def _handler(self, signum: int, frame: Any) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True
        self.signum = self.signum or signum

    @contextmanager
    def installed(self) -> Iterator[StopFlag]:
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        for s in old:
            signal.signal(s, self._handler)
        try:
            yield self
        finally:
            for s, h in old.items():
                signal.signal(s, h)


# --- the loop ----------------------------------------------------------------------------------


def train(
    cfg: Config,
    run_dir: Path,
    *,
    data_dir: Path,
    resume: bool = False,
    overwrite: bool = False,
    log: Callable[[str], None] = print,
    display: Display | None = None,
    stop: StopFlag | None = None,
    start: Start | None = None,
) -> TrainResult:
    """Train ``cfg`` into ``run_dir`` (see the module docstring); returns a summary. ``start``:
    how the run starts (:func:`nmt.training.finetune.run_start`; by default as ``run_dir``
    and ``resume`` say)."""
    dist = init_distributed(cfg.train.device)
    ok = False
    try:
        # rank 0 holds the run directory for as long as it trains: one writer per run; a start
        # that fails before writing anything leaves no empty run directory behind, and one
        # that fails before its first checkpoint leaves the run it was to --overwrite
        with (run_lock(run_dir) if dist.main else nullcontext(),
              no_empty_run_dir_left(run_dir) if dist.main else nullcontext(),
              previous_run_kept(run_dir, overwrite) if dist.main else nullcontext()):
            result = _train(cfg, run_dir, dist, data_dir, resume, overwrite,
                            log if dist.main else (lambda s: None),
                            display if display is not None and dist.main else Display(),
                            stop or StopFlag(), start)
        ok = True
        return result
    finally:
        end_distributed(dist, ok)


def _train(cfg: Config, run_dir: Path, dist: Dist, data_dir: Path, resume: bool,
           overwrite: bool, log: Callable[[str], None], display: Display,
           stop: StopFlag, start: Start | None) -> TrainResult:
    t = cfg.train
    run, state = set_up(cfg, run_dir, dist, data_dir, resume, overwrite, log, display, start)
    model, prepared, device = state.model, run.prepared, run.device
    forward = training_forward(model, t, dist, device)

    prog = state.progress
    if validation_owed(run, prog):
        validate(run, state)
    elif start is not None and start.baseline and not resume:
        score_start(run, state)
    collator = Collator(prepared.splits["train"], truncate=cfg.data.truncate,
                        pad_to_multiple=t.pad_to_multiple)
    groups = batch_groups(prepared, t, dist, prog.epoch, prog.batch_in_epoch)
    invocation_loss, invocation_tokens = 0.0, 0  # this invocation, this rank
    first_step = prog.step + 1
    out_of_time = bool(t.max_minutes and prog.elapsed >= 60 * t.max_minutes)  # as saved
    interrupted = False
    run.started = run.last_save = time.perf_counter()  # tokens/s count from the first step
    estimated = not (t.max_steps and t.max_minutes)  # whether the budget's estimate is said
    model.train()
    with stop.installed():
        while not (reason := stop_reason(t, prog, out_of_time, interrupted)):
            epoch, done, n_batches, group = next(groups)
            objective, loss, n_tokens = train_step(forward, state, group, collator, run)
            prog.step += 1
            if state.ema is not None:
                state.ema.update(model)
            bad, out_of_time, interrupted = any_rank(
                [not math.isfinite(objective), bool(t.max_minutes and
                                                    run.clock() > 60 * t.max_minutes),
                 stop.check(prog.step)], dist, device)
            if bad:
                raise non_finite_loss(run, prog.step)
            prog.epoch, prog.batch_in_epoch = (epoch + 1, 0) if done == n_batches else (epoch,
                                                                                        done)
            invocation_loss += loss
            invocation_tokens += n_tokens
            record = account(run, state, loss, n_tokens, invocation_tokens)
            display.step(epoch, -(-done // t.accum_steps), -(-n_batches // t.accum_steps),
                         record)
            if not estimated and dist.main:
                steps, seconds = prog.step - first_step + 1, time.perf_counter() - run.started
                if steps >= ESTIMATE_STEPS or seconds >= 0.1 * 60 * t.max_minutes:
                    estimated = True
                    line = time_budget_warning(t, prog.step, run.clock(), seconds / steps)
                    if line:
                        run.mlog.text(line)
                        display.note(line)
            if validation_due(t, prog) and not interrupted:  # else owed: done on --resume
                validate(run, state)
    display.close()

    prog.stop_reason = reason
    cut: str | None = None
    if interrupted:
        save(run, state, "last")
        last = checkpoint_path(run_dir)
        run.mlog.text(f"interrupted at step {prog.step}; saved {last.name}")
        log(f"interrupted: saved {last} at step {prog.step}; continue with --resume")
    else:
        cut = finish(run, state)
    tokens = all_reduce_sum(invocation_tokens, dist, device)
    seconds = max(run.clock() - run.elapsed0, 1e-9)
    return TrainResult(
        run_dir=run_dir, progress=prog,
        train_loss=all_reduce_sum(invocation_loss, dist, device) / max(tokens, 1),
        tokens_per_sec=tokens / seconds, device=str(device), tokens=int(tokens),
        first_step=first_step,
        main=dist.main, metrics=run.mlog.records, signal=stop.signum if interrupted else 0,
        flops_per_token=split_flops_per_token(cfg, prepared), cut_short=cut,
    )


def split_flops_per_token(cfg: Config, prepared: Prepared) -> float:
    """Training FLOPs per target token of ``cfg``'s model over the training split's pairs (their
    mean lengths, ``<eos>`` included)."""
    split = prepared.splits["train"]
    return training_flops_per_target_token(cfg.model, prepared.tokenizer.tgt_vocab_size,
                                           float(split.src_lengths().mean()) + 1,
                                           float(split.tgt_lengths().mean()) + 1)


# --- set-up ------------------------------------------------------------------------------------


def set_up(cfg: Config, run_dir: Path, dist: Dist, data_dir: Path, resume: bool,
           overwrite: bool, log: Callable[[str], None], display: Display,
           start: Start | None) -> tuple[Run, TrainingState]:
    """The run directory, the data, the model and its optimizer as ``start`` says, or all of
    their state from ``last.pt`` with ``--resume``; a new run's files written."""
    t = cfg.train
    device = training_device(t, dist, log)
    saved = open_run_dir(run_dir, cfg, dist, resume, overwrite)
    start = start if start is not None else run_start(cfg, None, run_dir, resume)
    # a resumed run's data: the files its config names from the folder it was trained in
    data_cfg = anchored_config(cfg, run_dir) if resume else cfg
    prepared, excluded = prepare_data(data_cfg, data_dir, dist, log, start.tokenizer,
                                      start.excluded)
    model = build_model(cfg.model, prepared.tokenizer.src_vocab_size,
                        prepared.tokenizer.tgt_vocab_size, joint_vocab=prepared.tokenizer.joint)
    if start.weights is not None:
        model.load_state_dict(start.weights())
    model.to(device)
    optimizer, scheduler = build_optimizer(t, model)
    ema = ExponentialMovingAverage(model, t.ema_decay) if t.ema_decay else None
    state = TrainingState(model, optimizer, scheduler, ema, Progress())
    if start.keep is not None:
        start.keep(state)
    for line in start.said:
        log(line)
    run = Run(cfg, run_dir, dist, device, prepared, MetricsLog(run_dir, dist.main),
              valid_sets(cfg, prepared, start.valid_data, data_dir, dist, log), display,
              elapsed0=0.0,
              hardware=hardware_record(str(device), hardware(device), dist.world_size))
    if saved is not None:
        restore(run, state, saved)
        log(f"resuming {run_dir} at step {state.progress.step} (epoch "
            f"{state.progress.epoch + 1}, batch {state.progress.batch_in_epoch})")
    else:  # a new run; a resume writes its config with its first save
        save_config(run)
        if dist.main:
            prepared.tokenizer.save(run_dir / TOKENIZER_DIR)
            if prepared.identity:  # nmt bleu scores the run on this data only
                write_corpus_record(run_dir, prepared.identity, data_dir)
            if excluded is not None:  # what its cache's key holds, for a resume and nmt bleu
                write_excluded(run_dir, excluded)
            for name, text in start.files.items():
                atomic_write_text(run_dir / name, text)
    run.mlog.text(f"{'resume' if resume else 'start'}: {cfg.model.arch}, "
                  f"{count_parameters(model):,} parameters, device {device} "
                  f"({run.hardware['name']}), "
                  f"{dist.world_size} process(es)")
    said = precision_said(device, t.precision)
    run.mlog.text(said)
    log(said)
    return run, state


def training_device(t: TrainConfig, dist: Dist, log: Callable[[str], None]) -> torch.device:
    """The device this process trains on; also sets the threads (saying so in ``log`` when
    there are fewer CPUs than ``train.threads``) and seeds every RNG."""
    if t.precision == "fp16":
        raise ConfigError("train.precision: fp16 does not train here (it needs loss scaling); "
                          "expected fp32 or bf16")
    device = resolve_device(t.device, "train.device")
    if dist.world_size > 1 and device.type == "cuda":
        device = torch.device("cuda", dist.local_rank)
    note = set_threads(t.threads)
    if note:
        log(note)
    seed = t.seed + dist.rank
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return device


def training_forward(model: nn.Module, t: TrainConfig, dist: Dist,
                     device: torch.device) -> nn.Module:
    """The module a training step calls: the model, wrapped for several processes
    (DistributedDataParallel) and compiled when asked."""
    wrapped: nn.Module = model
    if dist.world_size > 1:
        from torch.nn.parallel import DistributedDataParallel

        wrapped = DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None)
    if not t.compile:
        return wrapped
    separate_compiled_kernels()
    return torch.compile(wrapped, mode=t.compile_mode)  # type: ignore[return-value]


# --- stopping ----------------------------------------------------------------------------------

INTERRUPTED = "interrupted"


ESTIMATE_STEPS = 20  # steps (or a tenth of the time budget) before the budget's estimate


def time_budget_warning(t: TrainConfig, step: int, elapsed: float,
                        seconds_per_step: float) -> str | None:
    """After ``step`` steps and ``elapsed`` training seconds (across resumes): a line saying that
    ``train.max_minutes`` will stop a run of ``train.max_steps`` short, with the estimate at
    ``seconds_per_step``; None when the budget allows every step (or either limit is off).
    Validations come on top of the estimate, so a run it allows may still be stopped."""
    if not (t.max_steps and t.max_minutes) or step >= t.max_steps:
        return None
    needed = elapsed + (t.max_steps - step) * seconds_per_step
    budget = 60 * t.max_minutes
    if needed <= budget:
        return None
    reached = step + max(budget - elapsed, 0) / max(seconds_per_step, 1e-9)
    return (f"warning: at {seconds_per_step:.3g} s a step, the {t.max_steps:,} steps of "
            f"train.max_steps take about {needed / 60:.1f} min; train.max_minutes = "
            f"{t.max_minutes:g} stops training near step {int(reached):,} (raise "
            "train.max_minutes, or lower train.max_steps)")


def stop_reason(t: TrainConfig, prog: Progress, out_of_time: bool, interrupted: bool) -> str:
    """Why training ends now, or "" to go on: every rule that ends a run.

    Asked before every step, so a resumed run that had already ended trains no more unless
    ``--set`` raised the limit that ended it. ``train.epochs`` counts only when ``max_steps``
    is 0. ``out_of_time`` and ``interrupted`` are decisions every rank agreed on.
    """
    if interrupted:
        return INTERRUPTED
    if t.max_steps and prog.step >= t.max_steps:
        return f"reached max_steps={t.max_steps}"
    if out_of_time:
        return time_budget_reason(t.max_minutes)
    if t.patience and prog.evals_since_best >= t.patience:
        return f"early stopping: no better valid score in {t.patience} validations"
    if not t.max_steps and prog.epoch >= t.epochs:
        return f"completed {t.epochs} epochs"
    return ""


__all__ = ["train", "Display", "Progress", "Run", "StopFlag", "TrainResult", "TrainingState",
           "masked_cross_entropy", "stop_reason", "train_step", "training_forward",
           "training_loss"]
