"""Which run and which checkpoint: ``--run`` (default: the latest run) and ``--checkpoint``
(best, last or a file) turned into paths. No torch here: the CTranslate2 path finds runs too.
"""

from __future__ import annotations

import os
from pathlib import Path

from nmt.arguments import option
from nmt.errors import CheckpointError
from nmt.runs.layout import CHECKPOINTS_DIR

RUNS_DIR = Path("runs")


def checkpoint_path(run_dir: Path, name: str = "last") -> Path:
    """A run's checkpoint ``name``: ``last`` (the latest, what --resume continues) or ``best``
    (the best validation's)."""
    return run_dir / CHECKPOINTS_DIR / f"{name}.pt"


def latest_run(runs_dir: Path = RUNS_DIR) -> Path:
    """The run directory under ``runs_dir`` whose checkpoint was written last."""
    candidates = [p.parent.parent for p in runs_dir.glob(f"*/{CHECKPOINTS_DIR}/last.pt")]
    if not candidates:
        raise CheckpointError(
            f"{runs_dir}: no trained run found (train one with `nmt train --config ...`, "
            "or name one with --run runs/NAME)"
        )
    return max(candidates, key=lambda p: checkpoint_path(p).stat().st_mtime)


def resolve_checkpoint(run_dir: Path, checkpoint: str) -> Path:
    """``best`` (falls back to ``last`` when no validation has run), ``last``, or a file path."""
    if checkpoint in ("best", "last"):
        path = checkpoint_path(run_dir, checkpoint)
        # what is there, whatever it is: a FIFO or a directory is refused when it is loaded
        if checkpoint == "best" and not os.path.lexists(path):
            path = checkpoint_path(run_dir)
        if not os.path.lexists(path):
            raise CheckpointError(
                f"{run_dir}: no checkpoint {checkpoint}.pt in {run_dir}/checkpoints"
            )
        return path
    path = Path(checkpoint)
    if not path.is_file():
        raise CheckpointError(
            f"{option('checkpoint')} {checkpoint}: expected best, last or a checkpoint file"
        )
    return path
