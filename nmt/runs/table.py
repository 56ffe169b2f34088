"""The run overview behind ``nmt runs``: one row per run directory, read without a model.

Each row comes from files training and ``nmt bleu`` leave in ``runs/NAME/``: the checkpoint
``checkpoints/last.pt`` (model config, parameters, ``progress``: step, stop reason), falling
back to ``config.toml``; ``metrics.jsonl`` (best valid BLEU); ``scores.test*.json`` (test BLEU,
the newest when several searches were scored); for a continued model, ``parent.json`` (the run it
continues) and, from ``metrics.jsonl``, its BLEU on the parent's valid split before training
(the parent's own) and at its latest validation, listed under the table. Checkpoints are read
through the one safe loader with their tensors memory-mapped, so a listing reads their headers,
not gigabytes of optimizer state. A directory that is broken or partial (no checkpoint yet, a
corrupt file, a config that no longer loads) gets a row with a note, never an exception.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from rich.table import Table

from nmt.arguments import option
from nmt.errors import CheckpointError, NmtError, first_line
from nmt.files import read_stored_text
from nmt.runs.time_budget import cut_short


@dataclass
class RunInfo:
    """What ``nmt runs`` shows about one run directory (None: not known)."""

    name: str
    path: Path
    model: str = ""  # "transformer 2x256 h4", "gru 2x512 bi"
    pair: str = ""  # "en-fr": data.source-data.target
    parameters: int | None = None  # trainable, tied weights counted once
    steps: int | None = None  # optimizer steps in last.pt
    best_valid_bleu: float | None = None
    best_valid_step: int | None = None
    test_bleu: float | None = None  # multi-reference sacrebleu BLEU of the newest test scoring
    test_beam: int = 1
    updated: float | None = None  # newest modification time of the run's files (epoch seconds)
    state: str = ""  # done, cut short (done, but the time budget stopped it short of its steps
    # or epochs), unfinished, partial (no checkpoint yet), starting (a training process holds
    # it before writing anything), broken, not a run
    status: str = ""  # the checkpoint's stop reason, or "unfinished"
    cut_short: str = ""  # what a cut-short run says of it (nmt.runs.time_budget.cut_short)
    note: str = ""  # what is missing or broken; empty for a healthy run
    parent: str = ""  # the run a continued model continues (parent.json)
    parent_bleu_start: float | None = None  # BLEU on the parent's valid split before training
    parent_bleu: float | None = None  # and at the latest validation that scored it
    parent_bleu_step: int | None = None

    @property
    def ok(self) -> bool:
        return not self.note


def describe_model(model: dict[str, Any]) -> str:
    """A [model] table -> its family's one line, "transformer 2x256 h4" / "gru 2x512 bi";
    an architecture this version does not know: "NAME LAYERSxD_MODEL"."""
    from nmt.config import families

    arch = model.get("arch", "?")
    family = families().get(arch)
    if family is not None:
        return family.describe(model)
    return f"{arch} {model.get('n_layers', '?')}x{model.get('d_model', '?')}"


def describe_pair(data: dict[str, Any]) -> str:
    """``"en-fr"``: the direction of a run's ``[data]`` (runs made before the pair was
    configurable have no source or target key: they are English to French)."""
    from nmt.config import DataConfig

    return f"{data.get('source', DataConfig.source)}-{data.get('target', DataConfig.target)}"


def count_state_parameters(state: dict[str, Any]) -> int:
    """Elements of a state dict's tensors, each storage counted once (tied weights share one).

    Only parameters are in the models' state dicts (the position table is not persistent)."""
    seen = set()
    total = 0
    for t in state.values():
        if not hasattr(t, "untyped_storage"):
            continue
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape))
        if key not in seen:
            seen.add(key)
            total += t.numel()
    return total


def _read_checkpoint(path: Path) -> dict[str, Any]:
    """The checkpoint's dict through :func:`nmt.runs.checkpoint.load_checkpoint`, its tensors
    memory-mapped (not read); a :class:`CheckpointError` naming the file when it is refused."""
    from nmt.runs.checkpoint import load_checkpoint

    try:
        return load_checkpoint(path, mmap=True, folder=path.parent.parent)  # RUN/checkpoints/
    except CheckpointError as e:  # "RUN/checkpoints/last.pt: why": the row names the run
        raise CheckpointError(f"{path.name}: {str(e).removeprefix(f'{path}: ')}") from None


def _best_valid_bleu(run_dir: Path) -> tuple[float | None, int | None]:
    """The highest finite ``valid_bleu`` of metrics.jsonl and its step (the first of equals)."""
    from nmt.runs.directory import read_metrics

    best: tuple[float | None, int | None] = (None, None)
    for rec in read_metrics(run_dir):
        v = rec.get("valid_bleu")
        if is_number(v) and (best[0] is None or v > best[0]):
            best = (float(v), rec["step"])
    return best


PARENT_FILE = "parent.json"  # what a continued run records of its parent (nmt train --from)
PARENT_BLEU = "parent_valid_bleu"  # its BLEU on the parent's valid split (finetune.PARENT_SET)
AT_START = "at_start"  # the metrics.jsonl record of the scores of the weights it started from


def _parent(run_dir: Path, info: RunInfo) -> str:
    """Fill in what ``info`` shows of the parent of a continued run (its name, its BLEU on the
    parent's valid split before training and at the latest validation); a note when
    ``parent.json`` is unreadable, else ""."""
    from nmt.files import read_json
    from nmt.runs.directory import read_metrics

    path = run_dir / PARENT_FILE
    record = read_json(path, CheckpointError, "the parent an nmt run records")
    if record is None:
        return ""
    name = record.get("run") if isinstance(record, dict) else None
    if not isinstance(name, str) or not name or not name.isprintable():
        return f"{PARENT_FILE} unreadable"
    info.parent = name[:80]
    if not (run_dir / "metrics.jsonl").is_file():
        return ""
    for rec in read_metrics(run_dir):
        start = rec.get(AT_START)
        if isinstance(start, dict) and is_number(start.get(PARENT_BLEU)):
            info.parent_bleu_start = float(start[PARENT_BLEU])
        if is_number(rec.get(PARENT_BLEU)):
            info.parent_bleu, info.parent_bleu_step = float(rec[PARENT_BLEU]), rec["step"]
    return ""


def _test_bleu(run_dir: Path) -> tuple[float | None, int, str]:
    """(BLEU, beam, note) of the newest ``scores.test*.json``; (None, 1, "") when none."""
    from nmt.runs.layout import scores_engine, split_scores_files

    files = [p for p in split_scores_files(run_dir)  # not an export's (--engine ctranslate2)
             if not scores_engine(p).startswith("ct2")]
    if not files:
        return None, 1, ""
    try:
        report = json.loads(read_stored_text(files[-1], run_dir))
        bleu, beam = report["multi"]["bleu"], report.get("beam", 1)
    except (NmtError, ValueError, RecursionError, KeyError, TypeError, AttributeError):
        bleu = beam = None  # not JSON, or not a table holding multi.bleu
    if not (is_number(bleu) and 0 <= bleu <= 100 and is_number(beam) and beam >= 1
            and beam == int(beam)):
        return None, 1, f"{files[-1].name} unreadable"
    return float(bleu), int(beam), ""


def is_number(x: Any) -> TypeGuard[float]:
    """A finite JSON number (``true`` is not one)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _newest_mtime(run_dir: Path) -> float | None:
    times = [p.stat().st_mtime for p in (*run_dir.iterdir(), *run_dir.glob("checkpoints/*"))
             if p.is_file()]
    return max(times) if times else None


def run_info(run_dir: Path) -> RunInfo:
    """Everything :class:`RunInfo` holds for ``run_dir``; problems become ``note``."""
    from nmt.runs.directory import lock_holder
    from nmt.runs.paths import checkpoint_path

    info = RunInfo(name=run_dir.name, path=run_dir)
    notes: list[str] = []
    try:
        info.updated = _newest_mtime(run_dir)
        ckpt = checkpoint_path(run_dir)
        config: dict[str, Any] | None = None
        # whatever is there is read (a FIFO or a directory is refused, and said)
        if os.path.lexists(ckpt):
            try:
                payload = _read_checkpoint(ckpt)
                config = payload.get("config")
                info.parameters = count_state_parameters(payload.get("model", {}))
                progress = payload.get("progress", {})
                info.steps = int(progress.get("step", 0))
                finished = bool(progress.get("finished"))
                info.state = "done" if finished else "unfinished"
                info.status = str(progress.get("stop_reason") or "finished") if finished \
                    else "unfinished"
                train = config.get("train") if isinstance(config, dict) else None
                said = cut_short(progress, train) if isinstance(train, dict) else None
                if said:
                    info.state, info.cut_short = "cut short", said
            except NmtError as e:
                info.state = "broken"
                notes.append(str(e))
        elif os.path.lexists(run_dir / "config.toml"):
            info.state = "partial"
            notes.append("no checkpoint yet")
        elif (holder := lock_holder(run_dir)) is not None:
            info.state = "starting"
            notes.append(f"nmt train (PID {holder}) is preparing its data")
        else:
            info.state = "not a run"
            notes.append("not a run (no config.toml or checkpoint)")
        if config is None and os.path.lexists(run_dir / "config.toml"):
            from nmt.config import load_config

            try:
                config = load_config(run_dir / "config.toml", saved=True).to_dict()
            except NmtError:
                notes.append("config.toml invalid")
        if isinstance(config, dict) and isinstance(config.get("model"), dict):
            info.model = describe_model(config["model"])
        if isinstance(config, dict) and isinstance(config.get("data"), dict):
            info.pair = describe_pair(config["data"])
        if os.path.lexists(run_dir / "metrics.jsonl"):
            try:
                info.best_valid_bleu, info.best_valid_step = _best_valid_bleu(run_dir)
            except NmtError as e:
                notes.append(str(e).removeprefix(f"{run_dir}/"))
        info.test_bleu, info.test_beam, note = _test_bleu(run_dir)
        if note:
            notes.append(note)
        try:
            note = _parent(run_dir, info)
        except NmtError:
            note = f"{PARENT_FILE} unreadable"
        if note:
            notes.append(note)
    except Exception as e:  # noqa: BLE001 - a listing shows every run, however damaged
        info.state = "broken"
        notes.append(f"unreadable ({type(e).__name__}: {first_line(e, 80)})")
    info.note = "; ".join(notes)
    return info


def list_runs(runs_dir: Path) -> list[RunInfo]:
    """One :class:`RunInfo` per directory under ``runs_dir`` (hidden ones skipped), most
    recently updated first."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        raise CheckpointError(f"{option('runs_dir')} {runs_dir}: directory not found")
    infos = [run_info(p) for p in runs_dir.iterdir() if p.is_dir() and not p.name.startswith(".")]
    return sorted(infos, key=lambda i: (-(i.updated or 0.0), i.name))


def _fmt_params(n: int | None) -> str:
    if n is None:
        return "—"
    if n >= 1_000_000:
        return f"{n / 1e6:.1f}M"
    return f"{n / 1e3:.1f}k" if n >= 1_000 else str(n)


def _fmt_time(t: float | None, now: float | None = None) -> str:
    """``HH:MM`` today, ``MM-DD`` this year, ``YYYY-MM-DD`` before (short: 80-column tables)."""
    if t is None:
        return "—"
    local, today = time.localtime(t), time.localtime(now)
    if local[:3] == today[:3]:
        return time.strftime("%H:%M", local)
    return time.strftime("%m-%d" if local.tm_year == today.tm_year else "%Y-%m-%d", local)


def runs_table(infos: list[RunInfo], title: str = "runs") -> Table:
    """A rich table of ``infos``: run, language pair, model, params, steps, best valid BLEU,
    test BLEU (with ``bN`` for beam size N), last update and state; what is missing or broken
    is starred and listed under the table (so the table reads in 80 columns), and so is the run
    each continued model continues, with its BLEU on that run's valid split before training
    (the parent's) and at its latest validation, and where the time budget cut a run short
    (state "cut short")."""
    from rich import box

    # One space between columns (the box's), no padding: every character counts in 80 columns.
    table = Table(title=title, box=box.SIMPLE_HEAD, padding=0, title_justify="left",
                  caption_justify="left")
    table.add_column("run", style="bold", overflow="fold")
    table.add_column("pair", no_wrap=True)
    table.add_column("model")
    table.add_column("params", justify="right", no_wrap=True)
    table.add_column("steps", justify="right", no_wrap=True)
    table.add_column("valid\nBLEU", justify="right", no_wrap=True)
    table.add_column("test\nBLEU", justify="right", no_wrap=True)
    table.add_column("updated", no_wrap=True)
    table.add_column("state", no_wrap=True)
    notes, lineage = [], []
    for i in infos:
        if i.parent:
            lineage.append(f"{_escape(i.name)} continues {_escape(i.parent)}"
                           + parent_bleu_said(i))
        valid = "—" if i.best_valid_bleu is None else f"{i.best_valid_bleu:.2f}"
        test = "—" if i.test_bleu is None else f"{i.test_bleu:.2f}" + (
            f" b{i.test_beam}" if i.test_beam > 1 else "")
        state = _escape(i.state or "—")
        if i.cut_short:
            state = f"[yellow]{state}[/yellow]"
            notes.append(f"  {_escape(i.name)} {_escape(i.cut_short)}")
        if i.note:
            state = f"[yellow]{state}*[/yellow]"
            notes.append(f"* {_escape(i.name)}: {_escape(i.note)}")
        table.add_row(_escape(i.name), _escape(i.pair) or "—", i.model or "—",
                      _fmt_params(i.parameters),
                      "—" if i.steps is None else f"{i.steps:,}", valid, test,
                      _fmt_time(i.updated), state)
    if notes or lineage:
        table.caption = "\n".join([*lineage, *notes])
    return table


def parent_bleu_said(info: RunInfo) -> str:
    """": BLEU on its valid split 12.30 before training, 10.20 at step 40" (what is known)."""
    said = []
    if info.parent_bleu_start is not None:
        said.append(f"{info.parent_bleu_start:.2f} before training")
    if info.parent_bleu is not None:
        said.append(f"{info.parent_bleu:.2f} at step {info.parent_bleu_step:,}")
    return f": BLEU on its valid split {', '.join(said)}" if said else ""


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)
