"""Validation during training: when it is due (or owed by an interrupted run), the loss and
greedy BLEU of the scored weights on each named held-out set, the best-so-far bookkeeping (by
the run's own valid split) and the saves it triggers, and the end of a run (:func:`finish`)."""

from __future__ import annotations

import dataclasses
import math
import time

import torch

from nmt.config import Config, TrainConfig
from nmt.data.batching import Batch
from nmt.data.cache import Split
from nmt.data.tokenizers import Tokenizer
from nmt.device import autocast
from nmt.models.base import EncoderDecoder
from nmt.runs.table import AT_START
from nmt.runs.time_budget import cut_short
from nmt.training.batches import RUN_SET, ValidSet
from nmt.training.distributed import any_rank, from_main
from nmt.training.state import Progress, Run, TrainingState, save
from nmt.training.step import epoch_label, masked_cross_entropy


def validation_due(t: TrainConfig, prog: Progress) -> bool:
    """Whether the step just taken (``prog.step``) is one to validate: every ``eval_every``
    steps, or at the end of each epoch when it is 0."""
    return prog.step % t.eval_every == 0 if t.eval_every else prog.batch_in_epoch == 0


def validation_owed(run: Run, prog: Progress) -> bool:
    """Whether ``last.pt`` was saved at a step due for validation without it: an interruption
    saves at once and leaves that validation to the resume, which does it before its first
    step, so the validations, the early-stopping count and ``best.pt`` are those of a run that
    was never interrupted."""
    return (bool(run.valid_sets[RUN_SET].batches) and 0 < prog.step != prog.last_eval_step
            and validation_due(run.cfg.train, prog))


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


def validation_bleu(model: EncoderDecoder, split: Split | None, tokenizer: Tokenizer,
                    cfg: Config, device: torch.device) -> float | None:
    """Greedy corpus BLEU (multi-reference) on a fixed sample of ``split``'s sources."""
    n = cfg.train.eval_sentences
    if n < 0 or split is None or len(split) == 0:
        return None
    from nmt.evaluate import corpus_scores
    from nmt.translation.translator import translate_normalized

    sources, refs = split.grouped()
    if n > 0:
        sources, refs = sources[:n], refs[:n]
    hyps = translate_normalized(model, tokenizer, sources, cfg.decode, device, beam=1,
                                truncate=cfg.data.truncate)
    return corpus_scores(hyps, refs, tokenized=not cfg.data.natural_text,
                         lang=cfg.data.target).bleu


def set_scores(model: EncoderDecoder, valid: ValidSet, run: Run) -> tuple[float | None,
                                                                           float | None]:
    """The loss (None: no batches) and greedy BLEU (None: switched off) of ``model`` on one
    held-out set."""
    loss = None
    if valid.batches:
        loss = validation_loss(model, valid.batches, run.device, run.cfg.train.precision)
    return loss, validation_bleu(model, valid.split, run.prepared.tokenizer, run.cfg, run.device)


def validate(run: Run, state: TrainingState) -> None:
    """Score the weights on every held-out set (loss, and greedy BLEU unless switched off), then
    save ``last.pt``, and ``best.pt`` first when the run's own set scores the best so far. A set
    named N is recorded as ``N_loss`` and ``N_bleu`` and logged as "N loss, N BLEU"; the others
    than the run's own are recorded beside it and choose nothing."""
    prog = state.progress
    scores = {name: set_scores(state.scored, valid, run) for name, valid in run.valid_sets.items()}
    state.model.train()
    vloss, bleu = from_main(list(scores[RUN_SET]), run.dist, run.device)  # one verdict for all
    scores[RUN_SET] = vloss, bleu
    prog.last_eval_step = prog.step
    if vloss is None and bleu is None:
        # Nothing held out: keep last.pt reasonably fresh without paying for a write (and
        # fsync) every epoch of a tiny model.
        if any_rank([time.perf_counter() - run.last_save > 60], run.dist, run.device)[0]:
            save(run, state, "last")
        return
    score = bleu if bleu is not None else -(vloss or 0.0)
    loss = vloss if vloss is not None and math.isfinite(vloss) else math.inf
    record: dict[str, object] = {"step": prog.step, "epoch": epoch_label(prog)}
    for name, (set_loss, set_bleu) in scores.items():
        record.update({f"{name}_loss": set_loss, f"{name}_bleu": set_bleu})
    run.mlog.metric(record)
    # an equal score (BLEU is 0.00 for a while early on) is better when its loss is lower
    improved = score > prog.best_score or (score == prog.best_score and loss < prog.best_loss)
    if improved:
        prog.best_score, prog.best_loss, prog.best_step = score, loss, prog.step
        prog.evals_since_best = 0
    else:
        prog.evals_since_best += 1
    line = f"step {prog.step}: {scores_said(scores)}" + (" (best)" if improved else "")
    run.mlog.text(line)  # the log and the terminal say the same, best.pt's saves included
    run.display.validation(line)
    # best first: a kill between the two writes leaves best.pt one save ahead, which a resume
    # adopts as last.pt (run_dir.adopt_newer_best); the other order would lose it
    save(run, state, *(("best", "last") if improved else ("last",)))


def score_start(run: Run, state: TrainingState) -> None:
    """Score the weights a run starts from on every held-out set before its first step, so
    that the scores of the model it starts from stand beside its own on the same sets:
    recorded as ``{"step": S, "at_start": {"N_loss": ..., "N_bleu": ...}}``
    and logged ("before training"). It chooses nothing and saves nothing."""
    scores = {name: set_scores(state.scored, valid, run) for name, valid in run.valid_sets.items()}
    state.model.train()
    if all(v is None for pair in scores.values() for v in pair):
        return
    record = {f"{name}_{kind}": value for name, pair in scores.items()
              for kind, value in zip(("loss", "bleu"), pair, strict=True)}
    run.mlog.metric({"step": state.progress.step, AT_START: record})
    line = f"step {state.progress.step}, before training: {scores_said(scores)}"
    run.mlog.text(line)
    run.display.validation(line)


def scores_said(scores: dict[str, tuple[float | None, float | None]]) -> str:
    """"valid loss 2.314, valid BLEU 12.30; parent_valid loss ...": each set's scores."""
    return "; ".join(f"{name} loss {_fmt(set_loss)}, {name} BLEU {_fmt(set_bleu, 2)}"
                     for name, (set_loss, set_bleu) in scores.items())


def finish(run: Run, state: TrainingState) -> str | None:
    """The end of a run not stopped by a signal: the final weights are always validated, then
    saved as ``last.pt`` (and ``best.pt`` when better, or when nothing could score them).
    Returns what to say beside the run's scores when the time budget cut it short
    (:func:`nmt.runs.time_budget.cut_short`), also written to ``train.log``."""
    prog, t = state.progress, run.cfg.train
    prog.finished = True
    # Every rank takes the same branches here: each holds the same progress.
    validated = bool(run.valid_sets[RUN_SET].batches) and prog.last_eval_step != prog.step
    if validated:
        validate(run, state)
    if prog.best_score == -math.inf:
        save(run, state, "best", "last")  # nothing scored: the final weights are the best
    elif not validated:
        save(run, state, "last")  # records the run as finished
    run.mlog.text(f"done: {prog.stop_reason}")
    said = cut_short(prog.as_dict(), dataclasses.asdict(t))
    if said:
        run.mlog.text(f"note: {said}")
    return said


def _fmt(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"
