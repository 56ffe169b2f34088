"""Validation during training: when it is due (or owed by an interrupted run), the valid loss
and greedy BLEU of the scored weights, the best-so-far bookkeeping and the saves it triggers,
and the end of a run (:func:`finish`)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import torch

from nmt.config import Config, TrainConfig
from nmt.data.batching import Batch
from nmt.data.prepare import Prepared
from nmt.device import autocast
from nmt.models.base import EncoderDecoder
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
    return (bool(run.valid_batches) and 0 < prog.step != prog.last_eval_step
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


def validation_bleu(model: EncoderDecoder, prepared: Prepared, cfg: Config,
                    device: torch.device) -> float | None:
    """Greedy corpus BLEU (multi-reference) on a fixed sample of validation sources."""
    n = cfg.train.eval_sentences
    if n < 0 or "valid" not in prepared.splits or len(prepared.splits["valid"]) == 0:
        return None
    from nmt.evaluate import corpus_scores
    from nmt.translation.translator import translate_normalized

    sources, refs = prepared.splits["valid"].grouped()
    if n > 0:
        sources, refs = sources[:n], refs[:n]
    hyps = translate_normalized(model, prepared.tokenizer, sources, cfg.decode, device, beam=1,
                                truncate=cfg.data.truncate)
    return corpus_scores(hyps, refs, tokenized=not cfg.data.natural_text,
                         lang=cfg.data.target).bleu


def validate(run: Run, state: TrainingState) -> None:
    """Score the weights on the valid split (valid loss, and greedy BLEU unless switched off),
    then save ``last.pt``, and ``best.pt`` first when the score is the best so far. A continued
    model is also scored on its parent's valid split (logged as ``parent_valid_*``: what it
    forgets), which does not choose ``best.pt``."""
    prog, t = state.progress, run.cfg.train
    vloss = None
    if run.valid_batches:
        vloss = validation_loss(state.scored, run.valid_batches, run.device, t.precision)
    bleu = validation_bleu(state.scored, run.prepared, run.cfg, run.device)
    parent_loss = parent_bleu = None
    if run.parent_data is not None:  # a continued model: does it still translate the old data?
        if run.parent_valid_batches:
            parent_loss = validation_loss(state.scored, run.parent_valid_batches, run.device,
                                          t.precision)
        parent_bleu = validation_bleu(state.scored, run.parent_data, run.cfg, run.device)
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
    record = {"step": prog.step, "epoch": epoch_label(prog), "valid_loss": vloss,
              "valid_bleu": bleu}
    if run.parent_data is not None:  # logged beside, never what best.pt is chosen by
        record.update(parent_valid_loss=parent_loss, parent_valid_bleu=parent_bleu)
    run.mlog.metric(record)
    # an equal score (BLEU is 0.00 for a while early on) is better when its loss is lower
    improved = score > prog.best_score or (score == prog.best_score and loss < prog.best_loss)
    if improved:
        prog.best_score, prog.best_loss, prog.best_step = score, loss, prog.step
        prog.evals_since_best = 0
    else:
        prog.evals_since_best += 1
    line = f"step {prog.step}: valid loss {_fmt(vloss)}, valid BLEU {_fmt(bleu, 2)}"
    if run.parent_data is not None:
        line += (f"; the parent's valid loss {_fmt(parent_loss)}, BLEU "
                 f"{_fmt(parent_bleu, 2)}")
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


def _fmt(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"
