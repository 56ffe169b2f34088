"""A run that ``train.max_minutes`` stopped before the steps or epochs its config asked for: the
one rule by which every command that reports a run says so (the end of ``nmt train``,
``nmt bleu`` beside its scores, ``nmt runs``' status), so that a model cut short on a slow or
busy machine is never scored or shared as if it were the one the config describes.

The fact lives in the run's files already: ``checkpoints/last.pt`` holds the progress (``step``,
``epoch``, ``stop_reason``, ``finished``) and the config (``train.max_steps``, ``train.epochs``,
``train.max_minutes``) the run ended under. :func:`run_cut_short` reads them (its tensors
memory-mapped, not read); :func:`cut_short` is the rule on the two tables. No torch at import.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

TIME_BUDGET = "time budget"  # how the stop reason train.max_minutes gives begins


def time_budget_reason(max_minutes: float) -> str:
    """The stop reason of a run ``train.max_minutes`` ended (``progress.stop_reason``)."""
    return f"{TIME_BUDGET} of {max_minutes} min"


def cut_short(progress: dict[str, Any], train: dict[str, Any]) -> str | None:
    """What to say of a finished run the time budget stopped short, from its checkpoint's
    ``progress`` and its config's ``[train]`` table: ``"stopped at step 812 of 2,000
    (train.max_minutes = 20): a partly trained model"`` (a run of ``train.max_steps``), or
    ``"stopped at step 1,787, in epoch 3 of 60 (train.max_minutes = 10)"`` (a run of
    ``train.epochs``, which the budget may be meant to end). None for any other run."""
    if not (progress.get("finished") and
            str(progress.get("stop_reason", "")).startswith(TIME_BUDGET)):
        return None
    step, minutes = int(progress.get("step", 0)), train.get("max_minutes", 0)
    max_steps, epochs = int(train.get("max_steps", 0) or 0), int(train.get("epochs", 0) or 0)
    budget = f"train.max_minutes = {minutes:g}" if isinstance(minutes, (int, float)) else (
        "train.max_minutes")
    if max_steps:
        if step >= max_steps:
            return None
        return f"stopped at step {step:,} of {max_steps:,} ({budget}): a partly trained model"
    epoch = int(progress.get("epoch", 0))  # 0-based: the epoch in progress when it stopped
    if epochs and epoch < epochs:
        return f"stopped at step {step:,}, in epoch {epoch + 1} of {epochs} ({budget})"
    return None


def run_cut_short(run_dir: Path) -> str | None:
    """:func:`cut_short` of ``run_dir``'s ``checkpoints/last.pt``, naming the run (``"runs/demo
    stopped at step 812 of 2,000 ..."``); None when the run was not cut short, or when its
    last checkpoint cannot be read (whatever reads the run says that on its own)."""
    from nmt.errors import NmtError
    from nmt.runs.checkpoint import load_checkpoint
    from nmt.runs.paths import checkpoint_path

    path = checkpoint_path(run_dir)
    if not path.is_file():
        return None
    try:
        payload = load_checkpoint(path, mmap=True, folder=run_dir)
    except NmtError:
        return None
    progress, config = payload.get("progress"), payload.get("config")
    train = config.get("train") if isinstance(config, dict) else None
    if not (isinstance(progress, dict) and isinstance(train, dict)):
        return None
    said = cut_short(progress, train)
    return f"{run_dir} {said}" if said else None
