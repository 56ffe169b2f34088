"""Run directories: creation rules, the resumable config, and the metrics log.

``runs/NAME/`` holds ``config.toml`` (resolved), ``tokenizer/``, ``metrics.jsonl`` (one JSON
object a line: training lines with ``train_loss``, validation lines with ``valid_loss``; both
are per-token cross-entropy without label smoothing, so they compare),
``train.log``, ``checkpoints/{last,best}.pt`` and the plots. While ``nmt train`` writes it,
it holds ``.NAME.lock`` beside it (:func:`run_lock`).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path
from typing import Any

from nmt.checkpoint import load_checkpoint
from nmt.config import Config, from_dict, load_config
from nmt.errors import CheckpointError, ConfigError, NmtError
from nmt.files import append_text, atomic_write_bytes, atomic_write_text, make_dirs

# Sections whose change would make a checkpoint meaningless; the rest may change on --resume.
FROZEN_ON_RESUME = ("data", "model")


def start_run_dir(run_dir: Path, resume: bool, overwrite: bool) -> None:
    """Refuse to train into an existing run unless resuming (or explicitly overwriting)."""
    ckpt = run_dir / "checkpoints" / "last.pt"
    if resume:
        if not ckpt.is_file():
            raise CheckpointError(f"--resume: {ckpt} not found; nothing to resume")
        for name in ("checkpoints", "tokenizer"):
            if (run_dir / name).is_symlink():
                raise CheckpointError(f"{run_dir / name}: is a symbolic link; a run directory "
                                      "writes only into its own folders (remove the link)")
        return
    if run_dir.exists() and any(run_dir.iterdir()):
        if not overwrite:
            raise NmtError(
                f"{run_dir}: run directory exists; use --resume to continue it, --run-name to "
                "start another, or --overwrite to replace it" if ckpt.exists() else
                f"{run_dir}: directory exists and holds no checkpoint to resume (a start that "
                "failed?); use --overwrite to replace it, or --run-name to start another"
            )
        try:
            shutil.rmtree(run_dir)
        except OSError as e:
            raise NmtError(f"--overwrite: cannot remove {run_dir} ({e.strerror or e})") from None
    make_dirs(run_dir)


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold ``run_dir`` for one training process: a second writer is refused, naming the
    holder's PID. The lock is ``.NAME.lock`` beside the run directory (so ``--overwrite``, which
    removes the directory, cannot drop it) and is an ``flock``, which the operating system
    releases when the process ends, however it ends: a killed run leaves no stale lock.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock
        yield
        return
    make_dirs(run_dir.parent)
    path = run_dir.parent / f".{run_dir.name}.lock"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)
    except OSError as e:
        raise NmtError(f"{path}: cannot create the run's lock file ({e.strerror or e})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            raise NmtError(
                f"{run_dir}: another nmt train (PID {holder}) is writing this run; wait for it "
                "to finish or stop it, or use --run-name to start another"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def config_for_resume(run_dir: Path, overrides: list[str],
                      config_path: Path | None = None) -> Config:
    """The config a resumed run continues with: the run's saved config, or ``config_path``
    when given (so a changed ``[train]`` in the file takes effect), with the ``--set``
    overrides. Only ``[train]`` and ``[decode]`` may differ from what the checkpoint was
    trained with (its own config, not ``config.toml``, which may have been edited).
    """
    cfg = load_config(config_path or run_dir / "config.toml", overrides)
    trained = checkpoint_config(run_dir / "checkpoints" / "last.pt")
    change = frozen_change(cfg, trained)
    if change is not None:
        key, message = change
        if any(o.split("=", 1)[0].strip() == key for o in overrides):
            what = "--set"
        elif config_path is not None:
            what = f"--config {config_path}"
        else:
            what = str(run_dir / "config.toml")  # edited by hand
        raise ConfigError(f"{what}: {message}")
    return cfg


def run_config(run_dir: Path, trained: Config) -> Config:
    """The config a command that uses one of ``run_dir``'s checkpoints (trained with
    ``trained``) works with: the run's ``config.toml``, so that a hand edit of its ``[train]``
    or ``[decode]`` takes effect (as on ``--resume``); its ``[data]`` and ``[model]`` must be
    those the checkpoint was trained with."""
    path = run_dir / "config.toml"
    cfg = load_config(path)
    change = frozen_change(cfg, trained, when="after training")
    if change is not None:
        raise ConfigError(f"{path}: {change[1]}")
    return cfg


def checkpoint_config(path: Path) -> Config:
    """The config a checkpoint was trained with (a one-line error when it has none valid)."""
    payload = load_checkpoint(path)
    try:
        return from_dict(payload["config"], where=f"{path} config")
    except ConfigError as e:
        raise CheckpointError(f"{path}: incompatible checkpoint (bad config: {e})") from None


def frozen_change(cfg: Config, trained: Config,
                  when: str = "on --resume") -> tuple[str, str] | None:
    """The first key (``section.name``) of a section that cannot change on resume whose value in
    ``cfg`` differs from ``trained``'s, and a message saying so; None when none differs."""
    for section in FROZEN_ON_RESUME:
        new, old = getattr(cfg, section), getattr(trained, section)
        if new != old:
            key = next(f.name for f in fields(new) if getattr(new, f.name) != getattr(old, f.name))
            return f"{section}.{key}", (
                f"[{section}] cannot change {when} ({section}.{key} is "
                f"{getattr(new, key)!r:.40}, but the checkpoint was trained with "
                f"{getattr(old, key)!r:.40}); start a new run instead")
    return None


def validation_records(run_dir: Path) -> list[dict[str, Any]]:
    """The validation lines of ``metrics.jsonl`` (none when it is missing)."""
    if not (run_dir / "metrics.jsonl").is_file():
        return []
    from nmt.plot import read_metrics

    return [r for r in read_metrics(run_dir) if "valid_loss" in r]


def last_valid_step(run_dir: Path, up_to: int) -> int:
    """The step of the last validation line in ``metrics.jsonl`` at or before ``up_to`` (-1:
    none): what a checkpoint written before ``Progress.last_eval_step`` existed leaves out."""
    return max((r["step"] for r in validation_records(run_dir) if r["step"] <= up_to),
               default=-1)


def valid_loss_at(run_dir: Path, step: int) -> float:
    """The validation loss ``metrics.jsonl`` records at ``step`` (infinite: none): what a
    checkpoint written before ``Progress.best_loss`` existed leaves out."""
    losses = [r["valid_loss"] for r in validation_records(run_dir) if r["step"] == step]
    last = losses[-1] if losses else None
    if isinstance(last, (int, float)) and not isinstance(last, bool) and math.isfinite(last):
        return float(last)
    return math.inf


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
            append_text(self.metrics_path, "")

    # Appends never follow a symbolic link and fail as one line (disk full): see append_text.
    def metric(self, record: dict[str, Any]) -> None:
        self.records.append(record)
        if self.enabled:
            append_text(self.metrics_path, json.dumps(record) + "\n")

    def text(self, line: str) -> None:
        if self.enabled:
            append_text(self.log_path, time.strftime("%Y-%m-%d %H:%M:%S ") + line + "\n")

    def truncate_after(self, step: int, validated: int | None = None) -> None:
        """On resume, drop the metric lines the checkpoint does not account for (they will be
        redone): those after its ``step``, and validation lines after ``validated``, its
        latest validation (one owed by an interruption is done again on resume)."""
        validated = step if validated is None else validated
        if not (self.enabled and self.metrics_path.is_file()):
            return
        keep = []
        for line in self.metrics_path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
                rec_step = int(record.get("step", 0))
            except (json.JSONDecodeError, AttributeError, TypeError, ValueError):
                continue  # a line cut by a crash (or not a record at all)
            if rec_step <= (validated if "valid_loss" in record else step):
                keep.append(line)
        atomic_write_text(self.metrics_path, "".join(k + "\n" for k in keep))


def adopt_newer_best(run_dir: Path) -> None:
    """Make ``best.pt`` and ``last.pt`` agree again after a kill between their two writes.

    A validation that improves writes one save to ``best.pt`` and then to ``last.pt`` (in that
    order), so a process killed between the two renames leaves ``best.pt`` one save ahead of
    ``last.pt``. That save is exactly what ``last.pt`` was about to become: it is copied over
    ``last.pt`` (atomically), after which ``last.pt`` names ``best.pt``'s step as its best.
    """
    best, last = run_dir / "checkpoints" / "best.pt", run_dir / "checkpoints" / "last.pt"
    if not (best.is_file() and last.is_file()):
        return
    ahead = load_checkpoint(best).get("progress", {}).get("step", 0)
    if ahead > load_checkpoint(last).get("progress", {}).get("step", 0):
        data = best.read_bytes()
        atomic_write_bytes(last, lambda f: f.write(data))
