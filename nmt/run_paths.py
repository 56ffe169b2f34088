"""Which run and which checkpoint: ``--run`` (default: the latest run) and ``--checkpoint``
(best, last or a file) turned into paths. No torch here: the CTranslate2 path finds runs too.
"""

from __future__ import annotations

from pathlib import Path

from nmt.errors import CheckpointError

RUNS_DIR = Path("runs")


def latest_run(runs_dir: Path = RUNS_DIR) -> Path:
    """The run directory under ``runs_dir`` whose checkpoint was written last."""
    candidates = [p.parent.parent for p in runs_dir.glob("*/checkpoints/last.pt")]
    if not candidates:
        raise CheckpointError(
            f"{runs_dir}: no trained run found (train one with `nmt train --config ...`, "
            "or name one with --run runs/NAME)"
        )
    return max(candidates, key=lambda p: (p / "checkpoints" / "last.pt").stat().st_mtime)


def resolve_checkpoint(run_dir: Path, checkpoint: str) -> Path:
    """``best`` (falls back to ``last`` when no validation has run), ``last``, or a file path."""
    if checkpoint in ("best", "last"):
        path = run_dir / "checkpoints" / f"{checkpoint}.pt"
        if checkpoint == "best" and not path.is_file():
            path = run_dir / "checkpoints" / "last.pt"
        if not path.is_file():
            raise CheckpointError(
                f"{run_dir}: no checkpoint {checkpoint}.pt in {run_dir}/checkpoints"
            )
        return path
    path = Path(checkpoint)
    if not path.is_file():
        raise CheckpointError(
            f"--checkpoint {checkpoint}: expected best, last or a checkpoint file"
        )
    return path
