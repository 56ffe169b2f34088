"""Continuing a trained model on new data: ``nmt train --from RUN``.

The child run takes the parent's model and tokenizer; ``--config`` and ``--set`` apply to the
parent's config, key by key, and give the new ``[data]`` (its corpus or ``[[data.sources]]``,
filters, splits), ``[train]`` and ``[decode]``. A setting that would change the model or the
tokenizer is refused in one line naming it. The new corpus is encoded with the parent's
tokenizer (:func:`nmt.data.prepare.prepare`'s ``tokenizer``), the weights start as the parent's
``best.pt`` translates (its moving average when it keeps one), and the optimizer, the
learning-rate schedule and the step counter start afresh, as OpenNMT-py's ``train_from`` with
``reset_optim`` and JoeyNMT's ``load_model`` with its resets do; ``train.keep_from`` keeps any of
them (:func:`keep_from_parent`). The child records its parent in ``parent.json``: its name,
checkpoint, step and the checkpoint's SHA-256.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nmt.config import Config, DataConfig, load_config
from nmt.errors import CheckpointError, ConfigError, first_line
from nmt.files import atomic_write_text, read_json, user_path
from nmt.runs.portable import UnpackedCopy, open_run_copy

if TYPE_CHECKING:
    from nmt.data.prepare import Prepared
    from nmt.data.tokenizers import Tokenizer
    from nmt.models.base import EncoderDecoder
    from nmt.training.state import TrainingState

PARENT_FILE = "parent.json"
PARENT_CHECKPOINT = "best"
# [data] settings that decide what the ids mean: they are the parent's
TOKENIZER_KEYS = ("source", "target", "tokenizer", "sp_model_type", "vocab_size", "joint_vocab",
                  "character_coverage", "min_freq", "lowercase", "normalization")


@dataclass(frozen=True)
class Parent:
    """The run a child continues: its directory, the checkpoint it starts from, its config.
    ``label`` is how messages name it (the path given to ``--from``); ``name`` is what the
    child records (the run's own name for a copy inside an export); ``copy`` keeps a package's
    unpacked run copy alive and names its files as the package's members."""

    run_dir: Path
    checkpoint: Path
    config: Config
    label: str
    name: str = ""
    copy: UnpackedCopy | None = None

    @contextmanager
    def speaking(self) -> Iterator[None]:
        """Errors raised inside name a package's files as its members, not a temporary folder."""
        with self.copy.speaking() if self.copy is not None else nullcontext():
            yield

    def tokenizer(self) -> Tokenizer:
        from nmt.runs.loading import run_tokenizer

        with self.speaking():
            return run_tokenizer(self.run_dir)

    def weights(self) -> dict[str, Any]:
        """The weights the parent translates with (its moving average when it keeps one)."""
        from nmt.runs.loading import load_run

        with self.speaking():
            loaded = load_run(self.run_dir, str(self.checkpoint), "cpu")
        return loaded.model.state_dict()

    def record(self) -> dict[str, Any]:
        """What the child's ``parent.json`` says."""
        from nmt.runs.checkpoint import load_checkpoint

        with self.speaking():
            step = load_checkpoint(self.checkpoint, mmap=True).get("progress", {}).get("step")
        digest = hashlib.sha256()
        with self.checkpoint.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        return {"run": self.name or self.run_dir.resolve().name,
                "checkpoint": self.checkpoint.name,
                "data": self.config.to_dict()["data"],  # its valid split scores the child
                "step": step, "sha256": digest.hexdigest()}


FROM_KINDS = ("a run directory, an export directory made with nmt export --with-checkpoint, or "
              "its .argosmodel package")  # what --from takes


def open_parent(path: Path) -> Parent:
    """The model ``--from`` names, checked before any data is prepared: a run directory with a
    config and a best checkpoint, or an export made with ``--with-checkpoint`` (its directory,
    an unpacked Argos package, or the ``.argosmodel`` file, of which only the run copy's files
    are unpacked, :func:`nmt.runs.portable.open_run_copy`), whose run copy is the run
    continued. Its files are within their bounds, its ``config.toml`` describes the model and
    the data its checkpoint was trained with, and its tokenizer is the checkpoint's."""
    import zipfile

    from nmt.files import path_problem
    from nmt.runs.portable import RUN_COPY, exported_run_name, find_run_copy, is_export

    path = user_path(path, "--from")
    where = f"--from {path}"
    copy = None
    name = ""
    if path.is_file() and zipfile.is_zipfile(path):
        copy = open_run_copy(path, where)
        run_dir, name = copy.root, exported_run_name(copy.root)
    elif path.is_dir() and (found := find_run_copy(path)) is not None:
        run_dir, name = found, exported_run_name(found)
    elif path.is_dir() and is_export(path):
        raise CheckpointError(f"{where}: an export without its checkpoint ({RUN_COPY}/); "
                              "export the run again with nmt export --with-checkpoint to "
                              "continue it")
    elif path.is_dir():
        run_dir = path
    else:
        problem = ("is a file that is not a zip archive (an .argosmodel package is one)"
                   if path.is_file() else path_problem(path, "directory",
                                                       "run directory, export or package"))
        raise CheckpointError(f"{where}: {problem}; expected {FROM_KINDS}")
    try:
        checkpoint, config = _checked(run_dir, copy, path)
    except BaseException:
        if copy is not None:
            copy.cleanup()
        raise
    return Parent(run_dir, checkpoint, config, str(path), name, copy)


def _checked(run_dir: Path, copy: UnpackedCopy | None, given: Path) -> tuple[Path, Config]:
    """The best checkpoint of ``run_dir`` and the config it was trained with, once its files
    are within their bounds, its ``config.toml`` agrees with it and its tokenizer is the one
    its weights were trained on (errors name a package's files as its members)."""
    from nmt.runs.checkpoint import check_tokenizer, load_checkpoint
    from nmt.runs.directory import checkpoint_config, frozen_change
    from nmt.runs.loading import run_tokenizer
    from nmt.runs.paths import resolve_checkpoint
    from nmt.runs.portable import check_sizes

    again = ("export the run again with nmt export --with-checkpoint" if run_dir != given
             else "restore the config.toml it was trained with")
    with copy.speaking() if copy is not None else nullcontext():
        checkpoint = resolve_checkpoint(run_dir, PARENT_CHECKPOINT)
        check_sizes(run_dir, checkpoint)
        saved = load_checkpoint(checkpoint, mmap=True)  # the weights are checked when loaded
        trained = checkpoint_config(checkpoint, saved)
        own = run_dir / "config.toml"
        change = frozen_change(load_config(own, saved=True), trained, when="after training",
                               advice=again)
        if change is not None:
            raise CheckpointError(f"{own}: {change[1]}")
        check_tokenizer(checkpoint, saved["vocab"], run_tokenizer(run_dir),
                        f"{run_dir}/tokenizer", advice=again)
    return checkpoint, trained


def child_config(parent: Parent, config_path: Path | None, overrides: list[str]) -> Config:
    """The child's config: ``config_path`` and ``overrides`` applied to the parent's, with the
    model and the tokenizer's settings left as the parent's (a one-line error otherwise)."""
    was = parent.config
    theirs = was.model.to_dict()
    given = _model_table(config_path, overrides)
    for key, value in given.items():
        if theirs.get(key, object()) != value:
            raise ConfigError(f"model.{key}: {value!r:.40} would change the model of --from "
                              f"{parent.label} ({key} = {theirs.get(key)!r:.40}); a continued "
                              "model keeps it")
    cfg = load_config(config_path, overrides, base=was.to_dict(),
                      base_name=f"the config of --from {parent.label}")
    for key in TOKENIZER_KEYS:
        if getattr(cfg.data, key) != getattr(was.data, key):
            raise ConfigError(f"data.{key}: {getattr(cfg.data, key)!r:.40} would change the "
                              f"tokenizer of --from {parent.label} ({key} = "
                              f"{getattr(was.data, key)!r:.40}); a continued model keeps it")
    if cfg.model != was.model:
        mine, theirs = cfg.model.to_dict(), was.model.to_dict()
        key = next(k for k in {**mine, **theirs} if mine.get(k) != theirs.get(k))
        raise ConfigError(f"model.{key}: {mine.get(key)!r:.40} would change the model of --from "
                          f"{parent.label} ({key} = {theirs.get(key)!r:.40}); a continued "
                          "model keeps it")
    return dataclasses.replace(cfg, model=was.model)


def _model_table(config_path: Path | None, overrides: list[str]) -> dict[str, Any]:
    """The ``[model]`` keys the child's config file and overrides give."""
    from nmt.config import parse_override, read_toml

    raw = read_toml(config_path).get("model", {})
    table = dict(raw) if isinstance(raw, dict) else {}
    for text in overrides:
        section, name, value = parse_override(text)
        if section == "model":
            table[name] = value
    return table


def start_from_parent(model: EncoderDecoder, parent: Parent, run_dir: Path) -> None:
    """Load the parent's weights into ``model`` and record the parent in the child's run."""
    model.load_state_dict(parent.weights())
    atomic_write_text(run_dir / PARENT_FILE, json.dumps(parent.record(), indent=1) + "\n")


def keep_from_parent(parent: Parent, state: TrainingState, kept: list[str]) -> None:
    """What ``train.keep_from`` keeps of the parent's training, put into the child's fresh
    ``state``: Adam's moments (``optimizer``), the schedule's place (``schedule``), the step
    count (``step``). The child's own settings (its learning rate, betas, weight decay) stay:
    only the state is the parent's."""
    from nmt.runs.checkpoint import load_checkpoint

    if not kept:
        return
    with parent.speaking():
        payload = load_checkpoint(parent.checkpoint)
    where = f"--from {parent.label} ({parent.checkpoint.name})"
    optimizer, scheduler = state.optimizer, state.scheduler
    settings = [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups]
    base_lrs = list(scheduler.base_lrs)
    try:
        if "optimizer" in kept:
            optimizer.load_state_dict(payload["optimizer"])
            for group, own in zip(optimizer.param_groups, settings, strict=True):
                group.update(own)
        if "schedule" in kept:
            scheduler.load_state_dict(payload["scheduler"])
            scheduler.base_lrs = base_lrs  # the child's peak, at the parent's place
            for group, lr in zip(optimizer.param_groups, scheduler.get_lr(), strict=True):
                group["lr"] = lr
        if "step" in kept:
            state.progress.step = int(payload["progress"]["step"])
    except (KeyError, TypeError, ValueError, RuntimeError) as e:
        raise CheckpointError(f"{where}: cannot keep its {', '.join(kept)} (train.keep_from): "
                              f"{first_line(e, 120)}") from None


def parent_data_config(parent: Parent | None, run_dir: Path) -> DataConfig | None:
    """The data the parent trained on: ``parent``'s, or for a resumed child what its
    ``parent.json`` recorded (None: not a continued model, or one recorded without it)."""
    from nmt.config import from_dict

    if parent is not None:
        return parent.config.data
    record = read_parent(run_dir)
    if record is None or not isinstance(record.get("data"), dict):
        return None
    try:
        return from_dict({"data": record["data"]}, where=str(run_dir / PARENT_FILE),
                         saved=True).data
    except ConfigError as e:
        raise CheckpointError(str(e)) from None


def parent_validation(data: DataConfig, data_dir: Path, prepared: Prepared,
                      log: Callable[[str], None]) -> Prepared | None:
    """The parent's data encoded with the child's (the parent's) tokenizer, for its valid split;
    None, said once, where it cannot be prepared here (an export's data on another machine)."""
    from nmt.data.prepare import prepare
    from nmt.errors import NmtError

    try:
        parent = prepare(data, data_dir, log=lambda s: None, tokenizer=prepared.tokenizer)
    except NmtError as e:
        log(f"note: the parent's data cannot be prepared here ({first_line(e, 160)}); "
            "validating on the new data only")
        return None
    if len(parent.splits.get("valid", ())) == 0:
        log("note: the parent's data holds no valid split; validating on the new data only")
        return None
    log(f"validating on the parent's valid split too ({len(parent.splits['valid']):,} pairs)")
    return parent


def read_parent(run_dir: Path) -> dict[str, Any] | None:
    """A run's ``parent.json`` (None: it was not continued from another)."""
    path = Path(run_dir) / PARENT_FILE
    expected = "the parent an nmt run records"
    record = read_json(path, CheckpointError, expected)
    if record is not None and not (isinstance(record, dict)
                                   and isinstance(record.get("run"), str)):
        raise CheckpointError(f"{path}: expected {expected}")
    return record
