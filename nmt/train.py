"""The training loop: data, model, optimisation, validation, checkpoints, exact resume.

:func:`train` reads top to bottom. Set-up: the device, the run directory, the data, the model
and its optimizer (or all of their state from ``last.pt`` with ``--resume``). Then one
optimizer step after another: batch -> loss -> backward -> step -> maybe validate (which
saves) -> maybe stop. :func:`stop_reason` holds every rule that ends a run; a run that ends
other than by a signal is validated and saved a last time. A signal saves ``last.pt`` at once;
a validation due at that step is done by the resume before its first step
(:func:`validation_owed`), so an interrupted and resumed run is the uninterrupted one.

It runs on the CPU, one GPU (bf16 autocast) or several GPUs under ``torchrun``
(DistributedDataParallel; only rank 0 writes files, and only decisions all ranks share end
the loop). What a terminal shows meanwhile is the caller's (:mod:`nmt.train_command`).
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
import torch.nn.functional as F
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from nmt.checkpoint import (
    check_optimizer_state,
    check_tokenizer,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
    vocab_entry,
)
from nmt.config import Config, TrainConfig, from_dict
from nmt.cost import training_flops_per_target_token
from nmt.data.batching import Batch, Collator, collate, make_batches
from nmt.data.corpora.record import write_record
from nmt.data.prepare import Prepared, prepare
from nmt.data.tokenizers import PAD_ID
from nmt.device import autocast, resolve_device, set_threads
from nmt.distributed import (
    Dist,
    all_reduce_sum,
    any_rank,
    barrier,
    end_distributed,
    from_main,
    init_distributed,
)
from nmt.ema import ExponentialMovingAverage
from nmt.errors import CheckpointError, ConfigError, NmtError, first_line
from nmt.files import atomic_write_text
from nmt.loading import check_weights, run_tokenizer
from nmt.models import build_model, count_parameters
from nmt.models.base import EncoderDecoder
from nmt.optim import build_optimizer, use_config_hyperparameters
from nmt.run_dir import (
    MetricsLog,
    adopt_newer_best,
    frozen_change,
    last_valid_step,
    no_empty_run_dir_left,
    run_lock,
    start_run_dir,
    valid_loss_at,
)


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
    # training FLOPs per target token (nmt.cost) at the training split's mean lengths
    flops_per_token: float = 0.0


class Display:
    """What the loop shows while it runs. This one shows nothing; ``nmt train`` passes one that
    draws a progress bar (:class:`nmt.train_command.TerminalDisplay`)."""

    def step(self, epoch: int, step_in_epoch: int, steps_in_epoch: int,
             record: dict[str, Any] | None) -> None:
        """After every optimizer step; ``record`` is the metric line when one was written."""

    def validation(self, line: str) -> None:
        """After every validation, its one-line summary."""

    def close(self) -> None:
        """When the loop ends."""


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
) -> TrainResult:
    """Train ``cfg`` into ``run_dir`` (see the module docstring); returns a summary."""
    dist = init_distributed(cfg.train.device)
    ok = False
    try:
        # rank 0 holds the run directory for as long as it trains: one writer per run; a start
        # that fails before writing anything leaves no empty run directory behind
        with (run_lock(run_dir) if dist.main else nullcontext(),
              no_empty_run_dir_left(run_dir) if dist.main else nullcontext()):
            result = _train(cfg, run_dir, dist, data_dir, resume, overwrite,
                            log if dist.main else (lambda s: None),
                            display if display is not None and dist.main else Display(),
                            stop or StopFlag())
        ok = True
        return result
    finally:
        end_distributed(dist, ok)


def _train(cfg: Config, run_dir: Path, dist: Dist, data_dir: Path, resume: bool,
           overwrite: bool, log: Callable[[str], None], display: Display,
           stop: StopFlag) -> TrainResult:
    t = cfg.train
    device = training_device(t, dist)
    saved = open_run_dir(run_dir, cfg, dist, resume, overwrite)
    prepared = prepare_data(cfg, data_dir, dist, log)
    model = build_model(cfg.model, prepared.tokenizer.src_vocab_size,
                        prepared.tokenizer.tgt_vocab_size, joint_vocab=prepared.tokenizer.joint)
    model.to(device)
    optimizer, scheduler = build_optimizer(t, model)
    ema = ExponentialMovingAverage(model, t.ema_decay) if t.ema_decay else None
    state = TrainingState(model, optimizer, scheduler, ema, Progress())
    run = Run(cfg, run_dir, dist, device, prepared, MetricsLog(run_dir, dist.main),
              valid_batches(prepared, cfg), display, elapsed0=0.0)
    if saved is not None:
        restore(run, state, saved)
        log(f"resuming {run_dir} at step {state.progress.step} (epoch "
            f"{state.progress.epoch + 1}, batch {state.progress.batch_in_epoch})")
    if saved is None:  # a new run; a resume writes its config with its first save
        save_config(run)
        if dist.main:
            prepared.tokenizer.save(run_dir / "tokenizer")
            if prepared.identity:  # nmt bleu scores the run on this data only
                write_record(run_dir, prepared.identity)
    run.mlog.text(f"{'resume' if resume else 'start'}: {cfg.model.arch}, "
                  f"{count_parameters(model):,} parameters, device {device}, "
                  f"{dist.world_size} process(es)")
    forward = training_forward(model, t, dist, device)

    prog = state.progress
    if validation_owed(run, prog):
        validate(run, state)
    collator = Collator(prepared.splits["train"], truncate=cfg.data.truncate)
    groups = batch_groups(prepared, t, dist, prog.epoch, prog.batch_in_epoch)
    invocation_loss, invocation_tokens = 0.0, 0  # this invocation, this rank
    first_step = prog.step + 1
    out_of_time = bool(t.max_minutes and prog.elapsed >= 60 * t.max_minutes)  # as saved
    interrupted = False
    run.started = run.last_save = time.perf_counter()  # tokens/s count from the first step
    model.train()
    with stop.installed():
        while not (reason := stop_reason(t, prog, out_of_time, interrupted)):
            epoch, done, n_batches, group = next(groups)
            objective, loss, n_tokens = train_step(forward, state, group, collator, run)
            prog.step += 1
            if ema is not None:
                ema.update(model)
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
            if validation_due(t, prog) and not interrupted:  # else owed: done on --resume
                validate(run, state)
    display.close()

    prog.stop_reason = reason
    if interrupted:
        save(run, state, "last")
        run.mlog.text(f"interrupted at step {prog.step}; saved last.pt")
        log(f"interrupted: saved {run_dir}/checkpoints/last.pt at step {prog.step}; "
            "continue with --resume")
    else:
        finish(run, state, log)
    tokens = all_reduce_sum(invocation_tokens, dist, device)
    seconds = max(run.clock() - run.elapsed0, 1e-9)
    return TrainResult(
        run_dir=run_dir, progress=prog,
        train_loss=all_reduce_sum(invocation_loss, dist, device) / max(tokens, 1),
        tokens_per_sec=tokens / seconds, device=str(device), tokens=int(tokens),
        first_step=first_step,
        main=dist.main, metrics=run.mlog.records, signal=stop.signum if interrupted else 0,
        flops_per_token=split_flops_per_token(cfg, prepared),
    )


def split_flops_per_token(cfg: Config, prepared: Prepared) -> float:
    """Training FLOPs per target token of ``cfg``'s model over the training split's pairs (their
    mean lengths, ``<eos>`` included)."""
    split = prepared.splits["train"]
    return training_flops_per_target_token(cfg.model, prepared.tokenizer.tgt_vocab_size,
                                           float(split.src_lengths().mean()) + 1,
                                           float(split.tgt_lengths().mean()) + 1)


# --- what the loop works on --------------------------------------------------------------------


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
    valid_batches: list[Batch]
    display: Display
    elapsed0: float  # training seconds before this invocation (from the checkpoint)
    started: float = field(default_factory=time.perf_counter)
    last_save: float = field(default_factory=time.perf_counter)
    config_saved: bool = False  # config.toml holds cfg

    def clock(self) -> float:
        """Training seconds so far, across resumes."""
        return self.elapsed0 + time.perf_counter() - self.started


# --- set-up ------------------------------------------------------------------------------------


def training_device(t: TrainConfig, dist: Dist) -> torch.device:
    """The device this process trains on; also sets the threads and seeds every RNG."""
    if t.precision == "fp16":
        raise ConfigError("train.precision: fp16 does not train here (it needs loss scaling); "
                          "expected fp32 or bf16")
    device = resolve_device(t.device, "train.device")
    if dist.world_size > 1 and device.type == "cuda":
        device = torch.device("cuda", dist.local_rank)
    set_threads(t.threads)
    seed = t.seed + dist.rank
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return device


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
    path = run_dir / "checkpoints" / "last.pt"
    saved = load_checkpoint(path, map_location="cpu")
    trained = from_dict(saved["config"], where=f"{run_dir} checkpoint", saved=True)
    change = frozen_change(cfg, trained)
    if change is not None:
        raise ConfigError(f"{path}: {change[1]}")
    check_weights(path, trained, saved["vocab"], saved["model"])  # before building the model
    return saved


def prepare_data(cfg: Config, data_dir: Path, dist: Dist, log: Callable[[str], None]) -> Prepared:
    """The cached, encoded splits: rank 0 builds the cache, the others load it afterwards."""
    if dist.main:
        prepared = prepare(cfg.data, data_dir, log=log)
    barrier(dist)
    if not dist.main:
        prepared = prepare(cfg.data, data_dir, log=lambda s: None)
    if len(prepared.splits["train"]) == 0:
        raise NmtError("data: the training split is empty (check data.max_pairs and the fractions)")
    return prepared


def restore(run: Run, state: TrainingState, saved: dict[str, Any]) -> None:
    """Continue from ``last.pt``: weights, optimizer, schedule, average, progress, RNGs.

    Only with the tokenizer the weights were trained with: the data cache's (whose ids training
    goes on with) and the run's own (whose ids translation will decode) must both be it."""
    t, where = run.cfg.train, f"{run.run_dir}/checkpoints/last.pt"
    check_tokenizer(Path(where), saved["vocab"], run_tokenizer(run.run_dir),
                    f"{run.run_dir}/tokenizer")
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


def training_forward(model: nn.Module, t: TrainConfig, dist: Dist,
                     device: torch.device) -> nn.Module:
    """The module a training step calls: the model, wrapped for several processes
    (DistributedDataParallel) and compiled when asked."""
    wrapped: nn.Module = model
    if dist.world_size > 1:
        from torch.nn.parallel import DistributedDataParallel

        wrapped = DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None)
    return torch.compile(wrapped) if t.compile else wrapped  # type: ignore[return-value]


def epoch_batches(prepared: Prepared, t: TrainConfig, dist: Dist,
                  epoch: int) -> list[np.ndarray]:
    """This rank's batches (arrays of sentence indices) of ``epoch``, in training order. The
    order depends only on the seed and the epoch, so a resumed run sees the same batches."""
    split = prepared.splits["train"]
    return make_batches(split.src_lengths(), split.tgt_lengths(), batch_size=t.batch_size,
                        by=t.batch_by, shuffle=True, seed=t.seed, epoch=epoch,
                        rank=dist.rank, world_size=dist.world_size)


def batch_groups(prepared: Prepared, t: TrainConfig, dist: Dist, epoch: int,
                 start: int) -> Iterator[tuple[int, int, int, list[np.ndarray]]]:
    """The batches of one optimizer step after another, from batch ``start`` of ``epoch`` on:
    ``(epoch, batches of the epoch done after this step, batches in the epoch, the step's
    batches)``. ``accum_steps`` batches a step; an epoch's last step takes what is left."""
    while True:
        batches = epoch_batches(prepared, t, dist, epoch)
        if not batches:
            raise NmtError(
                f"train.batch_size={t.batch_size}: the training split makes no batch for "
                f"each of {dist.world_size} processes; use fewer processes or smaller batches")
        for i in range(start, len(batches), t.accum_steps):
            group = batches[i: i + t.accum_steps]
            yield epoch, i + len(group), len(batches), group
        epoch, start = epoch + 1, 0


def valid_batches(prepared: Prepared, cfg: Config) -> list[Batch]:
    split = prepared.splits.get("valid")
    if split is None or len(split) == 0:
        return []
    idx = make_batches(split.src_lengths(), split.tgt_lengths(), batch_size=cfg.decode.batch_size,
                       by="sentences", shuffle=False, seed=0, epoch=0)
    return [collate(split, i, truncate=cfg.data.truncate) for i in idx]


# --- one step ----------------------------------------------------------------------------------


def masked_cross_entropy(
    logits: torch.Tensor, tgt_out: torch.Tensor, label_smoothing: float = 0.0
) -> torch.Tensor:
    """Summed per-token cross-entropy over non-pad targets. logits (B,T,V), tgt_out (B,T)."""
    return F.cross_entropy(
        logits.reshape(-1, logits.size(-1)).float(),
        tgt_out.reshape(-1),
        ignore_index=PAD_ID,
        reduction="sum",
        label_smoothing=label_smoothing,
    )


def training_loss(
    logits: torch.Tensor, tgt_out: torch.Tensor, label_smoothing: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(objective, nll)``, both summed over non-pad targets: the objective is what training
    minimises (label-smoothed when asked), ``nll`` the plain cross-entropy (detached) that is
    reported, so train and valid loss are the same measure. With smoothing e the objective is
    ``(1 - e) nll + e mean_v(-log p_v)``, as ``F.cross_entropy(label_smoothing=e)``."""
    if label_smoothing == 0.0:
        loss = masked_cross_entropy(logits, tgt_out)
        return loss, loss.detach()
    tgt = tgt_out.reshape(-1)
    logp = torch.log_softmax(logits.reshape(-1, logits.size(-1)).float(), dim=-1)
    nll = F.nll_loss(logp, tgt, ignore_index=PAD_ID, reduction="sum")
    uniform = -(logp.mean(dim=-1) * (tgt != PAD_ID)).sum()
    return (1.0 - label_smoothing) * nll + label_smoothing * uniform, nll.detach()


def train_step(forward: nn.Module, state: TrainingState, group: list[np.ndarray],
               collator: Collator, run: Run) -> tuple[float, float, int]:
    """One optimizer step over the ``len(group)`` batches of ``group``: forward, loss, backward
    for each, then clip the gradients' global norm and update. Returns this rank's sums of the
    objective and of the cross-entropy, and its target tokens."""
    t, dist, device = run.cfg.train, run.dist, run.device
    batches = [collator(indices) for indices in group]
    n_tokens = sum(b.n_tokens for b in batches)
    # Normalise by the tokens of the whole step (all ranks), so accumulation and DDP's gradient
    # averaging give exactly the per-token mean.
    step_tokens = all_reduce_sum(float(n_tokens), dist, device) / dist.world_size
    sums = torch.zeros(2, device=device)  # objective, cross-entropy
    state.optimizer.zero_grad()
    for j, batch in enumerate(batches):
        batch = batch.to(device)
        last = j == len(batches) - 1  # DDP averages the gradients after the last batch only
        no_sync = forward.no_sync if dist.world_size > 1 and not last else nullcontext
        with no_sync():  # type: ignore[operator]
            with autocast(device, t.precision):
                logits = forward(batch.src, batch.src_lengths, batch.tgt_in)
            objective, nll = training_loss(logits, batch.tgt_out, t.label_smoothing)
            (objective / step_tokens).backward()
        sums += torch.stack([objective.detach(), nll])
    if t.clip_norm > 0:
        nn.utils.clip_grad_norm_(state.model.parameters(), t.clip_norm)
    state.optimizer.step()
    state.scheduler.step()
    objective_sum, nll_sum = sums.tolist()
    return objective_sum, nll_sum, n_tokens


def account(run: Run, state: TrainingState, loss: float, n_tokens: int,
            invocation_tokens: int) -> dict[str, Any] | None:
    """Count a step's tokens and loss; every ``log_every`` steps write (and return) a metric
    line of the mean train loss since the previous one."""
    prog, t = state.progress, run.cfg.train
    prog.tokens += n_tokens
    prog.window_loss += loss
    prog.window_tokens += n_tokens
    if prog.step % t.log_every:
        return None
    record = {"step": prog.step, "epoch": epoch_label(prog),
              "train_loss": prog.window_loss / max(prog.window_tokens, 1),
              "lr": state.scheduler.get_last_lr()[0],
              "tokens_per_sec": invocation_tokens * run.dist.world_size
              / max(time.perf_counter() - run.started, 1e-9)}
    run.mlog.metric(record)
    prog.window_loss, prog.window_tokens = 0.0, 0
    return record


def epoch_label(prog: Progress) -> int:
    """The 1-based epoch a record belongs to: the current one mid-epoch, the one just completed
    at an epoch boundary."""
    return prog.epoch + (1 if prog.batch_in_epoch else 0)


def non_finite_loss(run: Run, step: int) -> NmtError:
    kept = (f"the last good checkpoint is kept in {run.run_dir}/checkpoints"
            if (run.run_dir / "checkpoints" / "last.pt").is_file() else
            "no checkpoint had been saved yet")
    return NmtError(f"non-finite loss at step {step}: training stopped; {kept} (try a lower "
                    "train.lr or train.precision=fp32)")


# --- stopping, validation, checkpoints ---------------------------------------------------------

INTERRUPTED = "interrupted"


def validation_due(t: TrainConfig, prog: Progress) -> bool:
    """Whether the step just taken (``prog.step``) is one to validate: every ``eval_every``
    steps, or at the end of each epoch when it is 0."""
    return prog.step % t.eval_every == 0 if t.eval_every else prog.batch_in_epoch == 0


def validation_owed(run: Run, prog: Progress) -> bool:
    """Whether ``last.pt`` was saved at a step due for validation without it: an interruption
    saves at once and leaves that validation to the resume, which does it before its first
    step, so the validations, the early-stopping count and ``best.pt`` are those of a run that
    was never interrupted."""
    return (bool(run.valid_batches) and 0 < prog.step != prog.last_eval_step
            and validation_due(run.cfg.train, prog))


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
        return f"time budget of {t.max_minutes} min"
    if t.patience and prog.evals_since_best >= t.patience:
        return f"early stopping: no better valid score in {t.patience} validations"
    if not t.max_steps and prog.epoch >= t.epochs:
        return f"completed {t.epochs} epochs"
    return ""


@torch.no_grad()
def validation_loss(model: EncoderDecoder, batches: list[Batch], device: torch.device,
                    precision: str) -> float:
    model.eval()
    total, tokens = 0.0, 0
    for b in batches:
        b = b.to(device)
        with autocast(device, precision):
            logits = model(b.src, b.src_lengths, b.tgt_in)
        total += float(masked_cross_entropy(logits, b.tgt_out))
        tokens += b.n_tokens
    return total / max(tokens, 1)


def validation_bleu(model: EncoderDecoder, prepared: Prepared, cfg: Config,
                    device: torch.device) -> float | None:
    """Greedy corpus BLEU (multi-reference) on a fixed sample of validation sources."""
    n = cfg.train.eval_sentences
    if n < 0 or "valid" not in prepared.splits or len(prepared.splits["valid"]) == 0:
        return None
    from nmt.evaluate import corpus_scores
    from nmt.translate import translate_normalized

    sources, refs = prepared.splits["valid"].grouped()
    if n > 0:
        sources, refs = sources[:n], refs[:n]
    hyps = translate_normalized(model, prepared.tokenizer, sources, cfg.decode, device, beam=1,
                                truncate=cfg.data.truncate)
    return corpus_scores(hyps, refs, tokenized=not cfg.data.natural_text,
                         lang=cfg.data.target).bleu


def validate(run: Run, state: TrainingState) -> None:
    """Score the weights on the valid split (valid loss, and greedy BLEU unless switched off),
    then save ``last.pt``, and ``best.pt`` first when the score is the best so far."""
    prog, t = state.progress, run.cfg.train
    vloss = None
    if run.valid_batches:
        vloss = validation_loss(state.scored, run.valid_batches, run.device, t.precision)
    bleu = validation_bleu(state.scored, run.prepared, run.cfg, run.device)
    state.model.train()
    vloss, bleu = from_main([vloss, bleu], run.dist, run.device)  # one verdict on every rank
    prog.last_eval_step = prog.step
    if vloss is None and bleu is None:
        # Nothing held out: keep last.pt reasonably fresh without paying for a write (and
        # fsync) every epoch of a tiny model.
        if any_rank([time.perf_counter() - run.last_save > 60], run.dist, run.device)[0]:
            save(run, state, "last")
        return
    score = bleu if bleu is not None else -(vloss or 0.0)
    loss = vloss if vloss is not None and math.isfinite(vloss) else math.inf
    run.mlog.metric({"step": prog.step, "epoch": epoch_label(prog), "valid_loss": vloss,
                     "valid_bleu": bleu})
    # an equal score (BLEU is 0.00 for a while early on) is better when its loss is lower
    improved = score > prog.best_score or (score == prog.best_score and loss < prog.best_loss)
    if improved:
        prog.best_score, prog.best_loss, prog.best_step = score, loss, prog.step
        prog.evals_since_best = 0
    else:
        prog.evals_since_best += 1
    line = f"step {prog.step}: valid loss {_fmt(vloss)}, valid BLEU {_fmt(bleu, 2)}"
    run.mlog.text(line + (" (best)" if improved else ""))
    run.display.validation(line)
    # best first: a kill between the two writes leaves best.pt one save ahead, which a resume
    # adopts as last.pt (run_dir.adopt_newer_best); the other order would lose it
    save(run, state, *(("best", "last") if improved else ("last",)))


def finish(run: Run, state: TrainingState, log: Callable[[str], None]) -> None:
    """The end of a run not stopped by a signal: the final weights are always validated, then
    saved as ``last.pt`` (and ``best.pt`` when better, or when nothing could score them)."""
    prog, t = state.progress, run.cfg.train
    prog.finished = True
    # Every rank takes the same branches here: each holds the same progress.
    validated = bool(run.valid_batches) and prog.last_eval_step != prog.step
    if validated:
        validate(run, state)
    if prog.best_score == -math.inf:
        save(run, state, "best", "last")  # nothing scored: the final weights are the best
    elif not validated:
        save(run, state, "last")  # records the run as finished
    run.mlog.text(f"done: {prog.stop_reason}")
    if t.max_steps and prog.step < t.max_steps and prog.stop_reason.startswith("time"):
        log(f"warning: the time budget ended training at step {prog.step} of "
            f"max_steps={t.max_steps}: this machine is slower than train.max_minutes="
            f"{t.max_minutes} allows, so the model is less trained than the config intends")


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
    for name in names:
        save_checkpoint(run.run_dir / "checkpoints" / f"{name}.pt", payload)
    save_config(run)


def save_config(run: Run) -> None:
    """Write ``config.toml`` (rank 0), once an invocation: a new run at its start, a resume
    right after its first checkpoint, so a resume that fails before it saves anything leaves
    the run's config as it was (and the config always describes ``last.pt``)."""
    if run.dist.main and not run.config_saved:
        atomic_write_text(run.run_dir / "config.toml", run.cfg.to_toml())
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


def _fmt(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


__all__ = ["train", "Display", "Progress", "StopFlag", "TrainResult", "masked_cross_entropy",
           "stop_reason", "training_loss"]
