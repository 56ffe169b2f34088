"""Run directories: creation rules, the resumable config, and the metrics log.

``runs/NAME/`` holds ``config.toml`` (resolved), ``tokenizer/``, ``metrics.jsonl`` (one JSON
object a line: training lines with ``train_loss``, validation lines with ``valid_loss``; both
are per-token cross-entropy without label smoothing, so they compare),
``train.log``, ``checkpoints/{last,best}.pt`` and the plots.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from nmt.checkpoint import atomic_write_text
from nmt.config import Config, load_config
from nmt.errors import CheckpointError, ConfigError, NmtError

# Sections whose change would make a checkpoint meaningless; the rest may change on --resume.
FROZEN_ON_RESUME = ("data", "model")


def start_run_dir(run_dir: Path, resume: bool, overwrite: bool) -> None:
    """Refuse to train into an existing run unless resuming (or explicitly overwriting)."""
    ckpt = run_dir / "checkpoints" / "last.pt"
    if resume:
        if not ckpt.is_file():
            raise CheckpointError(f"--resume: {ckpt} not found; nothing to resume")
        return
    if run_dir.exists() and any(run_dir.iterdir()):
        if not overwrite:
            raise NmtError(
                f"{run_dir}: run directory exists; use --resume to continue it, --run-name to "
                "start another, or --overwrite to replace it" if ckpt.exists() else
                f"{run_dir}: directory exists and holds no checkpoint to resume (a start that "
                "failed?); use --overwrite to replace it, or --run-name to start another"
            )
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)


def config_for_resume(run_dir: Path, overrides: list[str],
                      config_path: Path | None = None) -> Config:
    """The config a resumed run continues with: the run's saved config, or ``config_path``
    when given (so a changed ``[train]`` in the file takes effect), with the ``--set``
    overrides. Only ``[train]`` and ``[decode]`` may differ from what the run was trained with.
    """
    saved = load_config(run_dir / "config.toml")
    cfg = load_config(config_path or run_dir / "config.toml", overrides)
    for section in FROZEN_ON_RESUME:
        if getattr(cfg, section) != getattr(saved, section):
            what = f"--config {config_path}" if config_path is not None else "--set"
            raise ConfigError(
                f"{what}: [{section}] cannot change on --resume (the checkpoint was trained with "
                f"{run_dir / 'config.toml'}); start a new run instead"
            )
    return cfg


def last_valid_step(run_dir: Path, up_to: int) -> int:
    """The step of the last validation line in ``metrics.jsonl`` at or before ``up_to`` (-1:
    none): what a checkpoint written before ``Progress.last_eval_step`` existed leaves out."""
    if not (run_dir / "metrics.jsonl").is_file():
        return -1
    from nmt.plot import read_metrics

    return max((r["step"] for r in read_metrics(run_dir)
                if "valid_loss" in r and r["step"] <= up_to), default=-1)


def check_run_name(name: str) -> str:
    """A run name is one directory name under the runs directory."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or not name.isprintable():
        raise NmtError(f"--run-name {name!r}: expected a directory name (no '/', not '.' or "
                       "'..'), e.g. --run-name demo-2")
    return name


class MetricsLog:
    """``metrics.jsonl`` (one JSON object a line) and a human ``train.log``; rank 0 only."""

    def __init__(self, run_dir: Path, enabled: bool) -> None:
        self.enabled = enabled
        self.metrics_path = run_dir / "metrics.jsonl"
        self.log_path = run_dir / "train.log"
        self.records: list[dict[str, Any]] = []
        if enabled:  # present from the start, even before the first line is due
            self.metrics_path.touch()

    def metric(self, record: dict[str, Any]) -> None:
        self.records.append(record)
        if self.enabled:
            with self.metrics_path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")

    def text(self, line: str) -> None:
        if self.enabled:
            with self.log_path.open("a", encoding="utf-8") as f:
                f.write(time.strftime("%Y-%m-%d %H:%M:%S ") + line + "\n")

    def truncate_after(self, step: int) -> None:
        """On resume, drop metric lines written after the checkpoint (they will be redone)."""
        if not (self.enabled and self.metrics_path.is_file()):
            return
        keep = []
        for line in self.metrics_path.read_text(encoding="utf-8").splitlines():
            try:
                rec_step = int(json.loads(line).get("step", 0))
            except (json.JSONDecodeError, AttributeError, TypeError, ValueError):
                continue  # a line cut by a crash (or not a record at all)
            if rec_step <= step:
                keep.append(line)
        atomic_write_text(self.metrics_path, "".join(k + "\n" for k in keep))


