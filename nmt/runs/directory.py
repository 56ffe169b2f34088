"""Run directories: creation rules, the resumable config, and the metrics log.

What ``runs/NAME/`` holds is named in :mod:`nmt.runs.layout`; ``metrics.jsonl`` has one JSON
object a line: training lines with ``train_loss``, validation lines with ``valid_loss`` (both
per-token cross-entropy without label smoothing, so they compare) and the ``hardware`` of each
start (:mod:`nmt.runs.records`). While ``nmt train`` writes it, it holds ``.NAME.lock`` beside
it (:func:`run_lock`).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import math
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from nmt import held_signals
from nmt.arguments import option
from nmt.config import Config, from_dict, load_config
from nmt.errors import CheckpointError, ConfigError, NmtError, named, os_reason, shown
from nmt.files import (
    TMP_SUFFIX,
    append_text,
    atomic_write_bytes,
    atomic_write_text,
    make_dirs,
    read_stored_bytes,
    read_stored_text,
    real_path,
)
from nmt.runs.layout import (
    CHECKPOINTS_DIR,
    CONFIG_FILE,
    EXPORTS_DIR,
    FILE_NAMES,
    LOG_FILE,
    METRICS_FILE,
    PREVIOUS_RUN_DIR,
    TOKENIZER_DIR,
)
from nmt.runs.paths import checkpoint_path

# Sections whose change would make a checkpoint meaningless; the rest may change on --resume.
FROZEN_ON_RESUME = ("data", "model")
# ... but for these keys of theirs, which translation applies and training does not read (the
# protected spans a translation keeps: a glossary may grow after training)
APPLIED_AT_TRANSLATION = {"data.spans", "data.glossary", "data.terms"}


# What nmt writes directly in a run directory (glob patterns): the files and folders of
# nmt.runs.layout, and the temporary file of a write killed before its rename. `--overwrite`
# deletes nothing else.
RUN_ENTRIES = (*(n for n in FILE_NAMES if "/" not in n and not n.endswith(".pt")),
               TOKENIZER_DIR, CHECKPOINTS_DIR, EXPORTS_DIR, PREVIOUS_RUN_DIR,
               f".*{TMP_SUFFIX}")


# What a start writes first (metrics.jsonl, then config.toml, before any training step): a run
# directory holds one of them, even one whose start failed before its first checkpoint (or
# only the run an --overwrite set aside, where it was killed before writing anything).
RUN_MARKERS = (METRICS_FILE, CONFIG_FILE, CHECKPOINTS_DIR, PREVIOUS_RUN_DIR)


def is_run_dir(path: Path) -> bool:
    """Whether ``path`` is a directory ``nmt train`` made (it holds one of :data:`RUN_MARKERS`)."""
    return path.is_dir() and any(os.path.lexists(path / name) for name in RUN_MARKERS)


def foreign_entry(run_dir: Path) -> Path | None:
    """The first entry of ``run_dir`` that nmt does not write there (None: all are nmt's)."""
    for entry in sorted(run_dir.iterdir()):
        if not _written_by_nmt(entry):
            return entry
    return None


def check_run_path(run_dir: Path, path: Path) -> Path:
    """``path``, a folder inside ``run_dir`` that nmt writes into, replaces or deletes; refused in
    one line when it, or a folder between it and ``run_dir``, is a symbolic link.

    Whatever links are planted in a run, what nmt writes there stays inside the run's own
    folders. A file written by rename (:func:`nmt.files.atomic_write_bytes`) replaces a link
    at its own name rather than following it: pass the file's folder.
    """
    rel = path.relative_to(run_dir)  # a programming error (ValueError) when outside the run
    if ".." in rel.parts:
        raise ValueError(f"{path}: not inside {run_dir}")
    current = run_dir
    for part in rel.parts:
        current = current / part
        if current.is_symlink():
            raise CheckpointError(f"{current}: is a symbolic link; a run directory writes only "
                                  "into its own folders (remove the link)")
    return path


def start_run_dir(run_dir: Path, resume: bool, overwrite: bool) -> None:
    """Refuse to train into an existing run unless resuming (or explicitly overwriting: then
    only a run directory holding nothing but what nmt writes is replaced, see
    :func:`set_aside`)."""
    ckpt = checkpoint_path(run_dir)
    previous = run_dir / PREVIOUS_RUN_DIR
    if resume:
        if not ckpt.is_file():
            kept = (f" ({previous} holds the run an --overwrite was replacing when it stopped, "
                    "before the new run's first checkpoint: move its files back to resume it)"
                    if previous.is_dir() else "")
            raise CheckpointError(f"{option('resume')}: {ckpt} not found; nothing to resume"
                                  f"{kept}")
        for name in (CHECKPOINTS_DIR, TOKENIZER_DIR):
            check_run_path(run_dir, run_dir / name)
        discard_previous_run(run_dir)  # left by a kill after the new run's first checkpoint
        return
    if run_dir.is_dir() and any(run_dir.iterdir()):
        if not overwrite:
            raise NmtError(
                f"{run_dir}: run directory exists; use --resume to continue it, --run-name to "
                "start another, or --overwrite to replace it" if ckpt.exists() else
                f"{run_dir}: directory exists and holds no checkpoint to resume (a start that "
                "failed?); use --overwrite to replace it, or --run-name to start another"
            )
        set_aside(run_dir)
    make_dirs(run_dir)


def set_aside(run_dir: Path) -> None:
    """What ``--overwrite`` does to an existing run directory: move what nmt wrote in it into
    ``run_dir/.previous-run/``, where it stays until the new run saves its first checkpoint
    (:func:`discard_previous_run`), or goes back if the new run stops before that
    (:func:`previous_run_kept`): a start that fails (a corpus that cannot be read, a model that
    does not fit, Ctrl-C while the data is prepared) loses nothing.

    Refused in one line, moving nothing, unless ``run_dir`` is a run directory
    (:func:`is_run_dir`) and everything in it is something nmt writes there
    (:data:`RUN_ENTRIES`): a folder of one's own under ``runs/``, or a run holding a file nmt
    did not write, is left alone. The directory itself is kept (it may be a link to a run on
    another disk); links inside it are moved, never followed. A ``.previous-run/`` already
    there (an --overwrite killed before its new run's first checkpoint) is still the run being
    replaced: what that start wrote beside it is deleted instead.
    """
    if not is_run_dir(run_dir):
        raise NmtError(f"{run_dir}: not a run directory (no config.toml, checkpoints/ or "
                       "metrics.jsonl); --overwrite replaces only a run nmt train made: move "
                       "the folder away, or use --run-name to start another")
    foreign = foreign_entry(run_dir)
    if foreign is not None:
        raise NmtError(f"{run_dir}: holds {foreign.name}, which nmt did not write; --overwrite "
                       "deletes only a run's own files: move it away, or use --run-name to "
                       "start another")
    previous = run_dir / PREVIOUS_RUN_DIR
    killed_start = previous.is_dir() and not checkpoint_path(run_dir).is_file()
    if not killed_start:
        discard_previous_run(run_dir)  # if any, the files beside it are a newer run
    entries = sorted(e for e in run_dir.iterdir() if e.name != PREVIOUS_RUN_DIR)
    try:
        if killed_start:  # the run set aside is still the one replaced: the start's files go
            for entry in entries:
                _remove(entry)
            return
        with held_signals.held():  # the folder made and the run in it, or neither
            previous.mkdir()
            try:
                _move_all(entries, previous)
            except OSError:
                with suppress(OSError):
                    previous.rmdir()
                raise
    except OSError as e:
        raise NmtError(f"{option('overwrite')}: cannot replace the run in "
                       f"{named(str(run_dir))} ({os_reason(e)})") from None


def discard_previous_run(run_dir: Path) -> None:
    """Delete the run ``--overwrite`` set aside (:func:`set_aside`), if there is one: the run
    that replaces it has a checkpoint. A folder that cannot be deleted is left, not an error."""
    previous = run_dir / PREVIOUS_RUN_DIR
    if previous.is_dir() and not previous.is_symlink():
        with held_signals.held():  # deleted whole: not a run in pieces beside the new one
            shutil.rmtree(previous, ignore_errors=True)


@contextmanager
def previous_run_kept(run_dir: Path, overwrite: bool) -> Iterator[None]:
    """Around a training started with ``--overwrite``: the run :func:`set_aside` moved away,
    if it is still there at the end (the new run stopped before its first checkpoint, by an
    error, Ctrl-C or SIGTERM), is put back in the place of what the new run wrote; once the
    new run has a checkpoint, it is gone."""
    try:
        yield
    finally:
        if overwrite:  # (killed before this, the next --overwrite or --resume settles it)
            _settle(run_dir)


def _settle(run_dir: Path) -> None:
    """The end of an --overwrite's training: :func:`previous_run_kept`'s work."""
    previous = run_dir / PREVIOUS_RUN_DIR
    with held_signals.held():
        if not previous.is_dir() or previous.is_symlink():
            return
        if checkpoint_path(run_dir).is_file():
            discard_previous_run(run_dir)
            return
        with suppress(OSError):
            for entry in sorted(run_dir.iterdir()):
                if entry.name != PREVIOUS_RUN_DIR and _written_by_nmt(entry):
                    _remove(entry)
            _move_all(sorted(previous.iterdir()), run_dir)
            previous.rmdir()


def _move_all(entries: list[Path], folder: Path) -> None:
    """Rename each of ``entries`` into ``folder``, signals held: all of them are moved, or, where
    one cannot be, those moved go back and the error is raised."""
    moved: list[Path] = []
    with held_signals.held():
        try:
            for entry in entries:
                os.replace(entry, folder / entry.name)
                moved.append(entry)
        except OSError:
            for entry in reversed(moved):
                with suppress(OSError):
                    os.replace(folder / entry.name, entry)
            raise


def _written_by_nmt(entry: Path) -> bool:
    return any(fnmatch.fnmatchcase(entry.name, pattern) for pattern in RUN_ENTRIES)


def _remove(entry: Path) -> None:
    """Delete a run's file or folder; a link is removed, never followed."""
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry)
    else:
        entry.unlink()


@contextmanager
def no_empty_run_dir_left(run_dir: Path) -> Iterator[None]:
    """Remove ``run_dir`` at the end of the block if the block left it empty and it was not an
    empty directory before (a start that failed before writing anything: the data could not be
    prepared, the model not built): no empty folder is left behind under ``runs/``. Only an
    empty directory is ever removed (``rmdir``)."""
    was_empty = run_dir.is_dir() and not any(run_dir.iterdir())
    try:
        yield
    finally:
        if not was_empty:
            with suppress(OSError):  # not empty (or gone): nothing to tidy
                run_dir.rmdir()


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold ``run_dir`` for one training process: a second writer is refused, naming the
    holder's PID. The lock is ``.NAME.lock`` beside the run directory (so ``--overwrite``, which
    empties the directory, cannot drop it) and is an ``flock``, which the operating system
    releases when the process ends, however it ends: a killed run leaves no stale lock. It sits
    beside the directory the name resolves to, so two names of one run (a link to it, another
    spelling of ``--runs-dir``) take the same lock.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock
        yield
        return
    make_dirs(run_dir.parent)
    real = real_path(run_dir, str(run_dir))
    path = real.parent / f".{real.name}.lock"
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


def lock_holder(run_dir: Path) -> str | None:
    """The PID of the process that holds ``run_dir``'s :func:`run_lock` now (``"unknown"``
    when it wrote none yet), or None when no process holds it. Only tries the lock: never
    waits, never creates the lock file."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock
        return None
    try:
        real = real_path(run_dir, str(run_dir))
        fd = os.open(real.parent / f".{real.name}.lock", os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except (OSError, NmtError):
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
    finally:
        os.close(fd)  # releases a lock this took
    return None


def config_for_resume(run_dir: Path, overrides: list[str],
                      config_path: Path | None = None) -> Config:
    """The config a resumed run continues with: the run's saved config, or ``config_path``
    when given (so a changed ``[train]`` in the file takes effect), with the ``--set``
    overrides. Only ``[train]`` and ``[decode]`` may differ from what the checkpoint was
    trained with (its own config, not ``config.toml``, which may have been edited). Its data
    is read as :func:`anchored_config` says, where the run was trained.
    """
    cfg = load_config(config_path or run_dir / CONFIG_FILE, overrides, saved=not config_path)
    trained = checkpoint_config(checkpoint_path(run_dir))
    change = frozen_change(cfg, trained)
    if change is not None:
        key, message = change
        if any(o.split("=", 1)[0].strip() == key for o in overrides):
            what = "--set"
        elif config_path is not None:
            what = f"--config {config_path}"
        else:
            what = str(run_dir / CONFIG_FILE)  # edited by hand
        raise ConfigError(f"{what}: {message}")
    return cfg


def run_config(run_dir: Path, trained: Config) -> Config:
    """The config a command that uses one of ``run_dir``'s checkpoints (trained with
    ``trained``) works with: the run's ``config.toml``, so that a hand edit of its ``[train]``
    or ``[decode]`` takes effect (as on ``--resume``); its ``[data]`` and ``[model]`` must be
    those the checkpoint was trained with."""
    path = run_dir / CONFIG_FILE
    cfg = load_config(path, saved=True)
    change = frozen_change(cfg, trained, when="after training")
    if change is not None:
        raise ConfigError(f"{path}: {change[1]}")
    return anchored_config(cfg, run_dir)


def anchored_config(cfg: Config, run_dir: Path) -> Config:
    """``cfg``, the saved config of ``run_dir``, with the relative paths of its ``[data]`` made
    absolute against the folder the run was trained in (:func:`nmt.data.corpus_specs.anchored`), so
    that a command on the run reads the files it was trained on from any folder: before, ``nmt
    bleu --run`` from elsewhere said ``mydata/train.en: file not found``, and ``nmt translate``
    could not read a relative ``data.glossary``."""
    from nmt.runs.records import working_dir

    base = working_dir(run_dir)
    if base is None:
        return cfg
    from nmt.data.corpus_specs import anchored

    return dataclasses.replace(cfg, data=anchored(cfg.data, base))


def checkpoint_config(path: Path, payload: dict[str, Any] | None = None) -> Config:
    """The config the checkpoint ``path`` (loaded: ``payload``) was trained with (a one-line
    error when it has none valid)."""
    from nmt.runs.checkpoint import load_checkpoint  # torch: not on the paths that only read a run

    payload = load_checkpoint(path) if payload is None else payload
    try:
        return from_dict(payload["config"], where=f"{path} config", saved=True)
    except ConfigError as e:
        raise CheckpointError(f"{path}: incompatible checkpoint (bad config: {e})") from None


def frozen_change(cfg: Config, trained: Config, when: str = "on --resume",
                  advice: str = "start a new run instead") -> tuple[str, str] | None:
    """The first key (``section.name``) of a section that cannot change on resume whose value in
    ``cfg`` differs from ``trained``'s, and a message saying so, ending in ``advice``; None
    when none differs."""
    tables, trained_tables = cfg.to_dict(), trained.to_dict()  # as config.toml has them
    for section in FROZEN_ON_RESUME:
        new, old = tables[section], trained_tables[section]
        key = next((k for k in {**new, **old} if new.get(k) != old.get(k)
                    and f"{section}.{k}" not in APPLIED_AT_TRANSLATION), None)
        if key is not None:
            return f"{section}.{key}", (
                f"[{section}] cannot change {when} ({section}.{key} is "
                f"{shown(new.get(key), 40)}, but the checkpoint was trained with "
                f"{shown(old.get(key), 40)}); {advice}")
    return None


def validation_records(run_dir: Path) -> list[dict[str, Any]]:
    """The validation lines of ``metrics.jsonl`` (none when it is missing)."""
    if not (run_dir / METRICS_FILE).is_file():
        return []
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


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """The records of ``run_dir/metrics.jsonl``; lines that are not JSON objects (a write cut
    short by a crash) are skipped."""
    path = Path(run_dir) / METRICS_FILE
    if not Path(run_dir).is_dir():
        raise CheckpointError(f"{run_dir}: run directory not found")
    if not os.path.lexists(path):
        raise CheckpointError(f"{path}: not found; nothing to plot (train the run first)")
    lines = read_stored_text(path, run_dir, CheckpointError, errors="replace").splitlines()
    return [rec for rec in map(metric_record, lines) if rec is not None]


def metric_record(line: str) -> dict[str, Any] | None:
    """One line of ``metrics.jsonl`` as a record: a JSON object whose ``step`` is a count; None
    for anything else (a line cut by a crash, junk, JSON nested too deeply to read)."""
    try:
        rec = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(rec, dict):
        return None
    step = rec.get("step")
    return rec if isinstance(step, int) and not isinstance(step, bool) and step >= 0 else None


class MetricsLog:
    """``metrics.jsonl`` (one JSON object a line) and a human ``train.log``; rank 0 only."""

    def __init__(self, run_dir: Path, enabled: bool) -> None:
        self.enabled = enabled
        self.metrics_path = run_dir / METRICS_FILE
        self.log_path = run_dir / LOG_FILE
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
        if not (self.enabled and os.path.lexists(self.metrics_path)):
            return
        keep = []
        text = read_stored_text(self.metrics_path, self.metrics_path.parent, CheckpointError,
                                errors="replace")
        for line in text.splitlines():
            rec = metric_record(line)  # None: a line cut by a crash (or not a record at all)
            if rec is not None and rec["step"] <= (validated if "valid_loss" in rec else step):
                keep.append(line)
        atomic_write_text(self.metrics_path, "".join(k + "\n" for k in keep))


def adopt_newer_best(run_dir: Path) -> None:
    """Make ``best.pt`` and ``last.pt`` agree again after a kill between their two writes.

    A validation that improves writes one save to ``best.pt`` and then to ``last.pt`` (in that
    order), so a process killed between the two renames leaves ``best.pt`` one save ahead of
    ``last.pt``. That save is exactly what ``last.pt`` was about to become: it is copied over
    ``last.pt`` (atomically), after which ``last.pt`` names ``best.pt``'s step as its best.
    """
    from nmt.runs.checkpoint import load_checkpoint

    best, last = checkpoint_path(run_dir, "best"), checkpoint_path(run_dir)
    if not (best.is_file() and last.is_file()):
        return
    ahead = load_checkpoint(best, folder=run_dir).get("progress", {}).get("step", 0)
    if ahead > load_checkpoint(last, folder=run_dir).get("progress", {}).get("step", 0):
        data = read_stored_bytes(best, run_dir, CheckpointError)
        atomic_write_bytes(last, lambda f: f.write(data))
