"""The training loop: data, model, optimisation, validation, checkpoints, exact resume.

Reads top to bottom: set-up (seeds, threads, device, distributed), data, model and optimizer,
then the loop with periodic validation and checkpointing. Works on CPU, one GPU (bf16 autocast)
or several GPUs under ``torchrun`` (DistributedDataParallel; only rank 0 writes files).
"""

from __future__ import annotations

import math
import os
import random
import signal
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

from nmt.checkpoint import (
    load_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from nmt.config import Config, TrainConfig, from_dict, load_config
from nmt.data.batching import Batch, Collator, collate, make_batches
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
from nmt.models import build_model, count_parameters
from nmt.models.base import EncoderDecoder
from nmt.optim import TrainOptimizer
from nmt.run_dir import (
    MetricsLog,
    adopt_newer_best,
    check_run_name,
    config_for_resume,
    frozen_change,
    last_valid_step,
    run_lock,
    start_run_dir,
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
    train_loss: float  # per-token cross-entropy (no label smoothing), this invocation, all ranks
    tokens_per_sec: float
    device: str
    tokens: int = 0  # target tokens trained on in this invocation, all ranks
    main: bool = True  # rank 0 (the process that reports)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    signal: int = 0  # the signal (SIGINT, SIGTERM) that stopped training early, else 0


# --- pieces of the loop ------------------------------------------------------------------------


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


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


def limit_reached(t: TrainConfig, prog: Progress, out_of_time: bool) -> str:
    """Why training ends here by one of its limits (max_steps, the time budget, patience), or
    "" while none is reached."""
    if t.max_steps and prog.step >= t.max_steps:
        return f"reached max_steps={t.max_steps}"
    if out_of_time:
        return f"time budget of {t.max_minutes} min"
    if t.patience and prog.evals_since_best >= t.patience:
        return _early_stopping(t)
    return ""


def _early_stopping(t: TrainConfig) -> str:
    return f"early stopping: no better valid score in {t.patience} validations"


def epoch_label(prog: Progress) -> int:
    """The 1-based epoch a record belongs to: the current one mid-epoch, the one just completed
    at an epoch boundary."""
    return prog.epoch + (1 if prog.batch_in_epoch else 0)


def lr_lambda(schedule: str, warmup: int) -> Callable[[int], float]:
    """Multiplier of the peak lr at optimizer step ``s`` (0-based)."""
    if schedule == "inverse_sqrt":
        w = max(warmup, 1)
        return lambda s: min((s + 1) / w, math.sqrt(w / (s + 1)))
    return lambda s: 1.0


def use_config_hyperparameters(optimizer: torch.optim.Optimizer, scheduler: Any,
                               t: TrainConfig) -> None:
    """After loading a checkpoint's optimizer and scheduler state, take the learning rate,
    betas and weight decay from the config (``--resume --set train.lr=...``): only Adam's
    moments and the step count carry over. Unchanged settings give the same values as saved."""
    scheduler.base_lrs = [t.lr for _ in scheduler.base_lrs]
    for group, base, factor in zip(optimizer.param_groups, scheduler.base_lrs,
                                   scheduler.lr_lambdas, strict=True):
        group.update(lr=base * factor(scheduler.last_epoch), initial_lr=base,
                     betas=(t.beta1, t.beta2), weight_decay=t.weight_decay)
    scheduler._last_lr = [group["lr"] for group in optimizer.param_groups]


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
        import threading

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


# --- validation --------------------------------------------------------------------------------


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
    return corpus_scores(hyps, refs, tokenized=not cfg.data.natural_text).bleu


# --- the loop ----------------------------------------------------------------------------------


def train(
    cfg: Config,
    run_dir: Path,
    *,
    data_dir: Path,
    resume: bool = False,
    overwrite: bool = False,
    log: Callable[[str], None] = print,
    progress_bar: bool = True,
    stop: StopFlag | None = None,
) -> TrainResult:
    """Train ``cfg`` into ``run_dir``; see the module docstring. Returns a summary."""
    dist = init_distributed(cfg.train.device)
    ok = False
    try:
        # rank 0 holds the run directory for as long as it trains: one writer per run
        with run_lock(run_dir) if dist.main else nullcontext():
            result = _train(cfg, run_dir, dist, data_dir=data_dir, resume=resume,
                            overwrite=overwrite, log=log, progress_bar=progress_bar, stop=stop)
        ok = True
        return result
    finally:
        end_distributed(dist, ok)


def _train(
    cfg: Config,
    run_dir: Path,
    dist: Dist,
    *,
    data_dir: Path,
    resume: bool,
    overwrite: bool,
    log: Callable[[str], None],
    progress_bar: bool,
    stop: StopFlag | None,
) -> TrainResult:
    if cfg.train.precision == "fp16":
        raise ConfigError("train.precision: fp16 does not train here (it needs loss scaling); "
                          "expected fp32 or bf16")
    device = resolve_device(cfg.train.device, "train.device")
    if dist.world_size > 1 and device.type == "cuda":
        device = torch.device("cuda", dist.local_rank)
    set_threads(cfg.train.threads)
    seed_everything(cfg.train.seed + dist.rank)
    if dist.main:
        start_run_dir(run_dir, resume, overwrite)
        if resume:
            adopt_newer_best(run_dir)
    barrier(dist)
    payload: dict[str, Any] = {}
    if resume:  # before the data is prepared: its config must be the checkpoint's
        payload = load_checkpoint(run_dir / "checkpoints" / "last.pt", map_location="cpu")
        change = frozen_change(cfg, from_dict(payload["config"], where=f"{run_dir} checkpoint"))
        if change is not None:
            raise ConfigError(f"{run_dir}/checkpoints/last.pt: {change[1]}")
    mlog = MetricsLog(run_dir, dist.main)
    say = log if dist.main else (lambda s: None)

    # Data: rank 0 builds the cache, the others load it after the barrier.
    if dist.main:
        prepared = prepare(cfg.data, data_dir, log=say)
    barrier(dist)
    if not dist.main:
        prepared = prepare(cfg.data, data_dir, log=lambda s: None)
    tok = prepared.tokenizer
    train_split = prepared.splits["train"]
    if len(train_split) == 0:
        raise NmtError("data: the training split is empty (check data.max_pairs and the fractions)")

    # Model and optimizer.
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size, joint_vocab=tok.joint)
    model.to(device)
    # The weights' moving average, made before the optimizer lays the weights out its own way.
    ema = ExponentialMovingAverage(model, cfg.train.ema_decay) if cfg.train.ema_decay else None
    optimizer = TrainOptimizer(cfg.train, list(model.parameters()), flat=device.type == "cpu")
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer.optimizer, lr_lambda(cfg.train.schedule, cfg.train.warmup_steps)
    )
    prog = Progress()
    if resume:
        try:
            model.load_state_dict(payload["model"])
            optimizer.load_state_dict(payload["optimizer"])
            scheduler.load_state_dict(payload["scheduler"])
            use_config_hyperparameters(optimizer.optimizer, scheduler, cfg.train)
            if ema is not None:
                if "ema" in payload:
                    ema.load_state_dict(payload["ema"])
                else:  # a run started without an average starts one from its weights now
                    ema = ExponentialMovingAverage(model, cfg.train.ema_decay)
            prog = Progress(**payload["progress"])
            if "last_eval_step" not in payload["progress"]:  # written before the field existed
                prog.last_eval_step = last_valid_step(run_dir, prog.step)
            rng = payload["rng"]
            set_rng_state(rng[dist.rank] if isinstance(rng, list) else rng)
        except (KeyError, ValueError, RuntimeError, TypeError, IndexError) as e:
            first = first_line(e)  # state_dict errors: lines
            raise CheckpointError(f"{run_dir}/checkpoints/last.pt: cannot resume "
                                  f"({type(e).__name__}: {first})") from None
        prog.finished, prog.stop_reason = False, ""  # new limits (--set) may allow more steps
        mlog.truncate_after(prog.step)
        say(f"resuming {run_dir} at step {prog.step} (epoch {prog.epoch + 1}, "
            f"batch {prog.batch_in_epoch})")
    elif dist.main:
        atomic_write_text(run_dir / "config.toml", cfg.to_toml())
        tok.save(run_dir / "tokenizer")
    if resume and dist.main:
        atomic_write_text(run_dir / "config.toml", cfg.to_toml())
    n_params = count_parameters(model)
    mlog.text(f"{'resume' if resume else 'start'}: {cfg.model.arch}, {n_params:,} parameters, "
              f"device {device}, {dist.world_size} process(es)")

    train_model: nn.Module = model
    if dist.world_size > 1:
        from torch.nn.parallel import DistributedDataParallel

        train_model = DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None
        )
    step_model: Callable[..., torch.Tensor] = train_model
    if cfg.train.compile:
        step_model = torch.compile(train_model)  # type: ignore[assignment]

    valid_batches = _valid_batches(prepared, cfg)
    collator = Collator(train_split, truncate=cfg.data.truncate)
    t = cfg.train
    src_len, tgt_len = train_split.src_lengths(), train_split.tgt_lengths()
    stop = stop or StopFlag()
    run_tokens, run_loss, start = 0, 0.0, time.perf_counter()
    elapsed0 = prog.elapsed

    last_save = [time.perf_counter()]

    def checkpoint(*names: str) -> None:
        """Write checkpoints/NAME.pt for each name (rank 0). Every rank must call it together:
        it gathers the ranks' RNG states."""
        last_save[0] = time.perf_counter()
        prog.elapsed = elapsed0 + (time.perf_counter() - start)
        if dist.world_size > 1:
            import torch.distributed as tdist

            # Tensors inside all_gather_object do not round-trip: send numpy arrays instead.
            states: list[Any] = [None] * dist.world_size
            tdist.all_gather_object(states, _map_tensors(rng_state(), lambda x: x.numpy()))
            rng: Any = [_map_tensors(st, torch.from_numpy, np.ndarray) for st in states]
        else:
            rng = rng_state()
        if not dist.main:
            return
        payload = {
            "config": cfg.to_dict(),
            "vocab": {"src": tok.src_vocab_size, "tgt": tok.tgt_vocab_size, "joint": tok.joint},
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "rng": rng,
            "progress": prog.as_dict(),
        }
        if ema is not None:
            payload["ema"] = ema.state_dict()
        for name in names:
            save_checkpoint(run_dir / "checkpoints" / f"{name}.pt", payload)

    def validate() -> bool:
        """Run validation; save best/last; return True when early stopping triggers."""
        vloss = None
        scored = ema.model if ema is not None else model  # the average, when there is one
        if valid_batches:
            vloss = validation_loss(scored, valid_batches, device, t.precision)
        bleu = validation_bleu(scored, prepared, cfg, device)
        model.train()
        vloss, bleu = from_main([vloss, bleu], dist, device)  # one verdict on every rank
        prog.last_eval_step = prog.step
        if vloss is None and bleu is None:
            # Nothing held out: keep last.pt reasonably fresh without paying for a write (and
            # fsync) every epoch of a tiny model.
            if any_rank([time.perf_counter() - last_save[0] > 60], dist, device)[0]:
                checkpoint("last")
            return False
        score = bleu if bleu is not None else (-vloss if vloss is not None else None)
        rec: dict[str, Any] = {"step": prog.step, "epoch": epoch_label(prog),
                               "valid_loss": vloss, "valid_bleu": bleu}
        mlog.metric(rec)
        improved = score is not None and score > prog.best_score
        if improved:
            assert score is not None
            prog.best_score, prog.best_step, prog.evals_since_best = score, prog.step, 0
        elif score is not None:
            prog.evals_since_best += 1
        msg = f"step {prog.step}: valid loss {_fmt(vloss)}, valid BLEU {_fmt(bleu, 2)}"
        mlog.text(msg + (" (best)" if improved else ""))
        if progress_bar and dist.main:
            _bar_write(msg)
        stop_now = bool(t.patience and prog.evals_since_best >= t.patience)
        if stop_now:
            prog.finished, prog.stop_reason = True, _early_stopping(t)
        # best first: a kill between the two writes leaves best.pt one save ahead, which a
        # resume adopts as last.pt (run_dir.adopt_newer_best); the other order would lose it
        checkpoint(*(("best", "last") if improved else ("last",)))
        return stop_now

    model.train()
    bar = _progress_bar(progress_bar and dist.main, prog)
    # Only decisions every rank shares end the loop: a signal counts once any_rank agreed on it
    # (the handler may set stop.requested on one rank at any moment, even after that).
    interrupted = False
    with stop.installed():
        while not prog.finished:
            # A run resumed after it ended (by steps, time or early stopping) trains no more
            # unless that limit was raised. The time is as saved (elapsed0): the same on every
            # rank, unlike each rank's clock.
            reason = limit_reached(t, prog, bool(t.max_minutes and
                                                 elapsed0 >= 60 * t.max_minutes))
            if reason:
                prog.stop_reason = reason
                break
            if t.max_steps == 0 and prog.epoch >= t.epochs:
                break
            batches = make_batches(src_len, tgt_len, batch_size=t.batch_size, by=t.batch_by,
                                   shuffle=True, seed=t.seed, epoch=prog.epoch,
                                   rank=dist.rank, world_size=dist.world_size)
            if not batches:
                raise NmtError(
                    f"train.batch_size={t.batch_size}: the training split makes no batch for "
                    f"each of {dist.world_size} processes; use fewer processes or smaller batches"
                )
            if bar is not None and prog.batch_in_epoch == 0:
                bar.reset(total=-(-len(batches) // t.accum_steps))
                bar.set_description(f"epoch {prog.epoch + 1}")
            i = prog.batch_in_epoch
            while i < len(batches):
                # accum_steps batches a step; an epoch's last step takes what is left
                group = batches[i: i + t.accum_steps]
                i += len(group)
                objective, loss_sum, n_tok = _train_step(
                    step_model, train_model, optimizer, scheduler, group, collator, cfg, device,
                    dist,
                )
                prog.step += 1
                if ema is not None:
                    ema.update(model)
                over = bool(t.max_minutes and
                            elapsed0 + time.perf_counter() - start > 60 * t.max_minutes)
                bad, over, stop_here = any_rank(
                    [not math.isfinite(objective), over, stop.check(prog.step)], dist, device)
                if bad:
                    kept = (f"the last good checkpoint is kept in {run_dir}/checkpoints"
                            if (run_dir / "checkpoints" / "last.pt").is_file() else
                            "no checkpoint had been saved yet")
                    raise NmtError(f"non-finite loss at step {prog.step}: training stopped; "
                                   f"{kept} (try a lower train.lr or train.precision=fp32)")
                prog.batch_in_epoch = i
                prog.tokens += n_tok
                prog.window_loss += loss_sum
                prog.window_tokens += n_tok
                run_loss += loss_sum
                run_tokens += n_tok
                if bar is not None:
                    bar.update(1)
                if prog.step % t.log_every == 0:
                    wall = time.perf_counter() - start
                    rec = {"step": prog.step, "epoch": epoch_label(prog),
                           "train_loss": prog.window_loss / max(prog.window_tokens, 1),
                           "lr": scheduler.get_last_lr()[0],
                           "tokens_per_sec": run_tokens * dist.world_size / max(wall, 1e-9)}
                    mlog.metric(rec)
                    prog.window_loss, prog.window_tokens = 0.0, 0
                    if bar is not None and bar.disable:  # no terminal: a line, not a bar
                        say(f"step {prog.step} (epoch {prog.epoch + 1}): train loss "
                            f"{rec['train_loss']:.3f}, lr {rec['lr']:.2e}, "
                            f"{rec['tokens_per_sec']:,.0f} tokens/s")
                    elif bar is not None:
                        bar.set_postfix(loss=f"{rec['train_loss']:.3f}", lr=f"{rec['lr']:.2e}",
                                        tok_s=f"{rec['tokens_per_sec']:,.0f}")
                reason = limit_reached(t, prog, over)
                if reason:
                    prog.finished, prog.stop_reason = True, reason
                if t.eval_every and prog.step % t.eval_every == 0 and not prog.finished:
                    if validate():
                        break
                if stop_here:
                    interrupted = stop.requested = True
                    break
                if prog.finished:
                    break
            if interrupted:
                prog.stop_reason = "interrupted"
                checkpoint("last")
                mlog.text(f"interrupted at step {prog.step}; saved last.pt")
                say(f"interrupted: saved {run_dir}/checkpoints/last.pt at step {prog.step}; "
                    "continue with --resume")
                break
            if prog.finished:
                break
            # End of epoch.
            prog.epoch += 1
            prog.batch_in_epoch = 0
            if not t.eval_every:
                if validate():
                    break
    if bar is not None:
        bar.close()
    if not interrupted:
        if not prog.stop_reason:
            prog.stop_reason = f"completed {t.epochs} epochs"
        prog.finished = True
        # The final weights are always validated (and saved as last, and best when better).
        # Every rank takes the same branches here: each holds the same progress.
        validated = bool(valid_batches) and prog.last_eval_step != prog.step
        if validated:
            validate()
        if prog.best_score == -math.inf:
            checkpoint("best", "last")  # nothing scored: the final weights are the best we have
        elif not validated:
            checkpoint("last")
        mlog.text(f"done: {prog.stop_reason}")
        if t.max_steps and prog.step < t.max_steps and prog.stop_reason.startswith("time"):
            say(f"warning: the time budget ended training at step {prog.step} of "
                f"max_steps={t.max_steps}: this machine is slower than train.max_minutes="
                f"{t.max_minutes} allows, so the model is less trained than the config intends")
    wall = time.perf_counter() - start
    run_tokens_all = all_reduce_sum(run_tokens, dist, device)
    run_loss_all = all_reduce_sum(run_loss, dist, device)
    result = TrainResult(
        run_dir=run_dir, progress=prog,
        train_loss=run_loss_all / max(run_tokens_all, 1),
        tokens_per_sec=run_tokens_all / max(wall, 1e-9),
        device=str(device), metrics=mlog.records, signal=stop.signum if interrupted else 0,
        tokens=int(run_tokens_all), main=dist.main,
    )
    if dist.main and not interrupted:
        _write_plots(run_dir)
    return result


def _train_step(
    step_model: Callable[..., torch.Tensor], train_model: nn.Module, optimizer: TrainOptimizer,
    scheduler: Any, group: list[np.ndarray], collator: Collator, cfg: Config,
    device: torch.device, dist: Dist,
) -> tuple[float, float, int]:
    """One optimizer step over ``len(group)`` accumulated batches. Returns the sums of the
    objective and of the cross-entropy over this rank's target tokens, and those tokens."""
    t = cfg.train
    batches = [collator(idx) for idx in group]
    n_tokens = sum(b.n_tokens for b in batches)
    # Normalise by the tokens of the whole step (all ranks), so accumulation and DDP's gradient
    # averaging give exactly the per-token mean.
    total_tokens = all_reduce_sum(float(n_tokens), dist, device) / dist.world_size
    sums = torch.zeros(2, device=device)  # objective, cross-entropy
    optimizer.zero_grad()
    for j, b in enumerate(batches):
        b = b.to(device)
        sync = j == len(batches) - 1
        ctx = train_model.no_sync() if (dist.world_size > 1 and not sync) else nullcontext()  # type: ignore[operator]
        with ctx:
            with autocast(device, t.precision):
                logits = step_model(b.src, b.src_lengths, b.tgt_in)
            objective, nll = training_loss(logits, b.tgt_out, t.label_smoothing)
            (objective / total_tokens).backward()
        sums += torch.stack([objective.detach(), nll])
    optimizer.step(t.clip_norm)
    scheduler.step()
    objective_sum, nll_sum = sums.tolist()
    return objective_sum, nll_sum, n_tokens


def _map_tensors(x: Any, fn: Callable[[Any], Any], kind: type = torch.Tensor) -> Any:
    """Apply ``fn`` to every ``kind`` leaf of nested dicts/lists/tuples."""
    if isinstance(x, kind):
        return fn(x)
    if isinstance(x, dict):
        return {k: _map_tensors(v, fn, kind) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_map_tensors(v, fn, kind) for v in x)
    return x


def _valid_batches(prepared: Prepared, cfg: Config) -> list[Batch]:
    split = prepared.splits.get("valid")
    if split is None or len(split) == 0:
        return []
    idx = make_batches(split.src_lengths(), split.tgt_lengths(), batch_size=cfg.decode.batch_size,
                       by="sentences", shuffle=False, seed=0, epoch=0)
    return [collate(split, i, truncate=cfg.data.truncate) for i in idx]


def _fmt(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def _progress_bar(enabled: bool, prog: Progress) -> Any:
    """The bar on a terminal. When stderr is not one (a log file, a pipe) or NMT_NO_PROGRESS=1,
    it is disabled and the loop prints a line every ``log_every`` steps instead of redrawing a
    bar into the log."""
    if not enabled:
        return None
    from tqdm import tqdm

    off = os.environ.get("NMT_NO_PROGRESS") == "1"
    bar = tqdm(total=0, unit="step", dynamic_ncols=True, leave=False,
               disable=True if off else None)  # None: tqdm's own "off unless a terminal"
    bar.set_description(f"epoch {prog.epoch + 1}")
    return bar


def _bar_write(msg: str) -> None:
    from tqdm import tqdm

    tqdm.write(msg)


def _write_plots(run_dir: Path) -> None:
    """Training curves into the run directory (a run with no metrics gets none)."""
    from nmt.plot import plot_training_curves

    try:
        plot_training_curves(run_dir)
    except NmtError:
        pass


def default_run_name(config_path: Path | None) -> str:
    return config_path.stem if config_path is not None else "run"


def run_train_command(
    config_path: Path | None, overrides: list[str], *, run_name: str | None, runs_dir: Path,
    data_dir: Path, resume: bool, overwrite: bool, log: Callable[[str], None],
) -> TrainResult:
    """What ``nmt train`` does: resolve config and run directory, then :func:`train`."""
    name = check_run_name(default_run_name(config_path) if run_name is None else run_name)
    run_dir = runs_dir / name
    if resume:
        if not (run_dir / "config.toml").is_file():
            raise CheckpointError(f"--resume: {run_dir}/config.toml not found; nothing to resume")
        cfg = config_for_resume(run_dir, overrides, config_path)
    else:
        cfg = load_config(config_path, overrides)
    return train(cfg, run_dir, data_dir=data_dir, resume=resume, overwrite=overwrite, log=log)


__all__ = ["train", "run_train_command", "Progress", "TrainResult", "masked_cross_entropy"]
