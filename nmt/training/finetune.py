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
checkpoint, step, the checkpoint's SHA-256 and its data, whose valid split the child is
validated on too (``parent_valid``: what it forgets), from the parent's weights before its first
step on. No source sentence of the parent's valid or test split is in the child's training split
(:func:`parent_held_out`): its training pairs with such a source are dropped, so the child is
never trained on what measures it; the child keeps the hashes of those sources
(``excluded_sources.txt``), so a resume or ``nmt bleu`` finds the same cache. :func:`run_start`
decides all of this once, before the loop, as a :class:`Start`; the loop knows nothing of
parents.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nmt.config import Config, DataConfig, load_config
from nmt.errors import CheckpointError, ConfigError, NmtError, first_line, shown
from nmt.files import stored_digest, user_path
from nmt.runs.layout import CONFIG_FILE, PARENT_FILE
from nmt.runs.portable import UnpackedCopy, open_run_copy
from nmt.runs.records import read_parent

if TYPE_CHECKING:
    from nmt.data.split import HeldOutSources
    from nmt.data.tokenizers import Tokenizer
    from nmt.training.batches import Excluded
    from nmt.training.state import TrainingState

PARENT_CHECKPOINT = "best"
# [data] settings that decide what the ids mean: they are the parent's
TOKENIZER_KEYS = ("source", "target", "tokenizer", "sp_model_type", "vocab_size", "joint_vocab",
                  "character_coverage", "min_freq", "lowercase", "normalization")
# the parent's valid split, which a child is validated on too (what it forgets): recorded as
# parent_valid_loss and parent_valid_bleu
PARENT_SET = "parent_valid"
# where the sources a child's training split leaves out come from, as the prepare report says
PARENT_HELD_OUT = "the parent's valid or test split"
ANCESTORS_HELD_OUT = "the valid or test split of the parent's ancestors"


@dataclass(frozen=True)
class Start:
    """How a run starts, decided before the loop by :func:`run_start`; the loop reads it and
    knows nothing of where it came from. As made here: a tokenizer trained on the data, weights
    initialised afresh, a new optimizer, schedule and step count, the run's own valid split."""

    tokenizer: Tokenizer | None = None  # encode the data with it; None: train one on the data
    weights: Callable[[], dict[str, Any]] | None = None  # the model's first weights
    keep: Callable[[TrainingState], None] | None = None  # puts kept training into a new state
    # other data whose valid split validation scores too, by the name it is recorded under
    valid_data: dict[str, DataConfig] = field(default_factory=dict)
    excluded: Excluded | None = None  # sources the training split leaves out
    baseline: bool = False  # score the first weights before the first step (a new child's)
    files: dict[str, str] = field(default_factory=dict)  # written into a new run's directory
    said: tuple[str, ...] = ()  # what the run says of its start


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

    def excluded(self) -> HeldOutSources | None:
        """The sources the parent's own training split left out (its ancestors' held-out
        sentences), as it recorded them; None where it left none out."""
        from nmt.runs.records import read_excluded

        with self.speaking():
            return read_excluded(self.run_dir)

    def record(self) -> dict[str, Any]:
        """What the child's ``parent.json`` says."""
        from nmt.runs.checkpoint import load_checkpoint

        with self.speaking():
            step = load_checkpoint(self.checkpoint, mmap=True).get("progress", {}).get("step")
        digest = stored_digest(self.checkpoint, None, CheckpointError)
        from nmt.runs.records import ancestor, ancestry_record

        name = self.name or self.run_dir.resolve().name
        data = self.config.data
        me = ancestor(self.run_dir, name, self.checkpoint.name, step, digest, data.test,
                      data.corpus)
        return {"run": name, "checkpoint": self.checkpoint.name,
                "data": self.config.to_dict()["data"],  # its valid split scores the child
                "step": step, "sha256": digest,
                # what its card inherits: this run's data, test set and scores, and its own
                # ancestors' (none holds a local path)
                "ancestors": ancestry_record(me, self.run_dir)}


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
    from nmt.runs.directory import anchored_config
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
        if name:  # a received package's word: checked as --run-name is
            _check_received_name(name, where)
        checkpoint, config = _checked(run_dir, copy, path)
        # its data's relative paths name files where it was trained (a run copy records no
        # folder): so the child finds the parent's held-out sentences from any folder
        config = anchored_config(config, run_dir)
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
             else f"restore the {CONFIG_FILE} it was trained with")
    with copy.speaking() if copy is not None else nullcontext():
        checkpoint = resolve_checkpoint(run_dir, PARENT_CHECKPOINT)
        check_sizes(run_dir, checkpoint)
        saved = load_checkpoint(checkpoint, mmap=True)  # the weights are checked when loaded
        trained = checkpoint_config(checkpoint, saved)
        own = run_dir / CONFIG_FILE
        change = frozen_change(load_config(own, saved=True), trained, when="after training",
                               advice=again)
        if change is not None:
            raise CheckpointError(f"{own}: {change[1]}")
        check_tokenizer(checkpoint, saved["vocab"], run_tokenizer(run_dir),
                        f"{run_dir}/tokenizer", advice=again)
    return checkpoint, trained


def _check_received_name(name: str, where: str) -> None:
    """The run name an export records (``nmt-export.json``), checked as ``--run-name`` is: it
    names the continued run and reaches its card."""
    from nmt.runs.layout import check_run_name
    from nmt.runs.portable import META_FILE

    try:
        check_run_name(name)
    except NmtError:
        raise CheckpointError(f"{where}: {META_FILE}: run: expected a run's name (a directory "
                              f"name on one line), got {shown(name)}") from None


def child_config(parent: Parent, config_path: Path | None, overrides: list[str]) -> Config:
    """The child's config: ``config_path`` and ``overrides`` applied to the parent's, with the
    model and the tokenizer's settings left as the parent's (a one-line error otherwise)."""
    was = parent.config
    theirs = was.model.to_dict()
    given = _model_table(config_path, overrides)
    for key, value in given.items():
        if theirs.get(key, object()) != value:
            raise ConfigError(f"model.{key}: {shown(value, 40)} would change the model of --from "
                              f"{parent.label} ({key} = {shown(theirs.get(key), 40)}); a continued "
                              "model keeps it")
    cfg = load_config(config_path, overrides, base=was.to_dict(),
                      base_name=f"the config of --from {parent.label}")
    for key in TOKENIZER_KEYS:
        if getattr(cfg.data, key) != getattr(was.data, key):
            raise ConfigError(f"data.{key}: {shown(getattr(cfg.data, key), 40)} would change the "
                              f"tokenizer of --from {parent.label} ({key} = "
                              f"{shown(getattr(was.data, key), 40)}); a continued model keeps it")
    if cfg.model != was.model:
        mine, theirs = cfg.model.to_dict(), was.model.to_dict()
        key = next(k for k in {**mine, **theirs} if mine.get(k) != theirs.get(k))
        raise ConfigError(f"model.{key}: {shown(mine.get(key), 40)} would change the model of "
                          f"--from {parent.label} ({key} = {shown(theirs.get(key), 40)}); a "
                          "continued model keeps it")
    return dataclasses.replace(cfg, model=was.model)


def run_start(cfg: Config, parent: Parent | None, run_dir: Path, resume: bool) -> Start:
    """What ``--from`` means, decided once before the loop. A new run continuing ``parent``
    starts from its weights on its tokenizer, keeps what ``train.keep_from`` names of its
    training, records it in ``parent.json`` and is validated on its valid split too; resumed, a
    run that recorded a parent goes on with its own tokenizer (the parent's) and that split. Any
    other run starts from scratch (or, resumed, from its own checkpoint alone)."""
    if parent is not None:
        kept = [k for k in cfg.train.keep_from.split(",") if k]
        rest = ("the rest as train.keep_from says" if kept else
                "a new optimizer, schedule and step count")
        said = [f"continuing {parent.label} ({parent.checkpoint.name}): its model and "
                f"tokenizer; {rest}"]
        if kept:
            said.append(f"kept of its training: {', '.join(kept)} (train.keep_from)")
        tokenizer = parent.tokenizer()
        return Start(tokenizer=tokenizer, weights=parent.weights,
                     keep=(lambda state: keep_from_parent(parent, state, kept)) if kept else None,
                     valid_data={PARENT_SET: parent.config.data},
                     excluded=lambda data_dir, log: parent_held_out(
                         parent.config.data, tokenizer, data_dir, log, parent.excluded()),
                     baseline=True,
                     files={PARENT_FILE: json.dumps(parent.record(), indent=1) + "\n"},
                     said=tuple(said))
    if resume and read_parent(run_dir) is not None:
        from nmt.runs.loading import run_tokenizer
        from nmt.runs.records import read_excluded

        data = recorded_parent_data(run_dir)
        return Start(tokenizer=run_tokenizer(run_dir),
                     valid_data={} if data is None else {PARENT_SET: data},
                     excluded=lambda data_dir, log: read_excluded(run_dir))
    return Start()


def parent_held_out(data: DataConfig, tokenizer: Tokenizer, data_dir: Path,
                    log: Callable[[str], None],
                    inherited: HeldOutSources | None = None) -> HeldOutSources | None:
    """The sources of the valid and test splits of the parent's ``data`` (prepared with its
    ``tokenizer``, as its ``parent_valid`` set is; a split depends neither on the tokenizer nor
    on what a training split left out, so they are the parent's own), and the sources the
    parent's own training left out (``inherited``: its ancestors' held-out sentences, so no
    generation trains on what measured an earlier one), which the child's training split
    leaves out. None where there are none; where the parent's data cannot be prepared here (an
    export from another machine), the inherited ones alone, said once."""
    from nmt.data.prepare import prepare
    from nmt.data.split import HeldOutSources

    try:
        prepared = prepare(data, data_dir, log=lambda s: None, tokenizer=tokenizer)
    except NmtError as e:
        log(f"warning: the parent's data cannot be prepared here ({first_line(e, 160)}); the "
            "training split is not kept apart from its valid and test sentences"
            + (" (only from those its ancestors held out)" if inherited else ""))
        return HeldOutSources(inherited.hashes, ANCESTORS_HELD_OUT) if inherited else None
    held = HeldOutSources.of((s for name in ("valid", "test") if name in prepared.splits
                              for s in prepared.splits[name].src_text), PARENT_HELD_OUT)
    if inherited:
        held = held.union(inherited, f"{PARENT_HELD_OUT}, or its ancestors'")
    return held if len(held) else None


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


def recorded_parent_data(run_dir: Path) -> DataConfig | None:
    """The data a continued run's ``parent.json`` says its parent trained on (None: not a
    continued run, or one recorded without it)."""
    from nmt.config import from_dict

    record = read_parent(run_dir)
    if record is None or not isinstance(record.get("data"), dict):
        return None
    try:
        return from_dict({"data": record["data"]}, where=str(run_dir / PARENT_FILE),
                         saved=True).data
    except ConfigError as e:
        raise CheckpointError(str(e)) from None

