"""A run's records, written and read typed: ``corpus.json`` (the data), ``parent.json`` (the run
it continues and that run's ancestry), the ``hardware`` a checkpoint was trained on and the
test scores ``scores.test*.json``.

The readers here check every value a model card shows against :mod:`nmt.runs.schema` (a
one-line error names the file and the field) and give it as a dataclass. What a record holds
that names the user's machine (a corpus' path, its files' folders) is kept in the run and cut to
a file name in what these readers give: an export says ``train.en``, never where it was.

Older runs are read as they are: a run made before runs recorded their data or their hardware
says so ("not recorded"), a ``parent.json`` made before it recorded the parent's ancestry names
the parent alone.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nmt import environment
from nmt.arguments import option
from nmt.errors import CheckpointError, DataError, NmtError, first_line
from nmt.files import atomic_write_text, read_json, read_stored_text
from nmt.runs.layout import (
    CORPUS_FILE,
    EXCLUDED_FILE,
    PARENT_FILE,
    scores_engine,
    split_scores_files,
)
from nmt.runs.schema import Fields

if TYPE_CHECKING:
    from nmt.data.split import HeldOutSources

NOT_RECORDED = "not recorded"
MAX_ANCESTORS = 64  # generations a parent.json may list


def file_name(text: str) -> str:
    """The last part of a path (``/home/me/data/train.en`` -> ``train.en``); text that is no
    path stays as it is."""
    return re.split(r"[/\\]", text.rstrip("/\\"))[-1] or text


# --- corpus.json -------------------------------------------------------------------------------


def _record(path: Path, error: type[NmtError], expected: str, key: str,
            kind: type) -> dict[str, Any] | None:
    """The JSON object of the record ``path`` (None where the run has none), which must hold
    ``key`` of type ``kind``; else ``error`` naming the file and ``expected``. Read as every
    file of a run is (:func:`nmt.files.open_stored`): a link out of the run is refused."""
    record = read_json(path, error, expected, folder=path.parent)
    if record is not None and not (isinstance(record, dict)
                                   and isinstance(record.get(key), kind)):
        raise error(f"{path}: expected {expected}")
    return record


def write_corpus_record(run_dir: Path, identity: dict[str, Any],
                        data_dir: Path | None = None) -> None:
    """Record the data a run trains on (its identity, as :mod:`nmt.data.corpora` gives it),
    and, with ``data_dir``, where: the data directory its cache is in (:func:`data_dir_for`)
    and the folder its config's relative paths name files from (:func:`working_dir`); neither
    is exported."""
    record = dict(identity)
    if data_dir is not None:
        record[DATA_DIR_KEY] = str(Path(data_dir).resolve())
        record[WORKING_DIR_KEY] = str(Path.cwd())
    atomic_write_text(Path(run_dir) / CORPUS_FILE, json.dumps(record, indent=1) + "\n")


DATA_DIR_KEY, WORKING_DIR_KEY = "data_dir", "working_dir"  # this machine's: never exported


def _recorded_folder(run_dir: Path, key: str) -> Path | None:
    """The folder ``run_dir``'s corpus record names under ``key``, where it still is (None: a
    run made before runs recorded it, or the folder is gone)."""
    record = read_corpus_record(run_dir)
    recorded = record.get(key) if record is not None else None
    return Path(recorded) if isinstance(recorded, str) and Path(recorded).is_dir() else None


def working_dir(run_dir: Path) -> Path | None:
    """The folder ``run_dir`` was trained in, where it still is."""
    return _recorded_folder(run_dir, WORKING_DIR_KEY)


def data_dir_for(run_dir: Path | None, given: Path | None) -> Path:
    """The data directory a command on the run ``run_dir``'s own data reads (``nmt bleu``,
    ``nmt export``'s scoring, ``nmt train --resume``): ``given`` (``--data-dir``), else
    ``$NMT_DATA_DIR``, else the one the run was trained from where it still is, else
    ``data/``. Without this, a run trained with ``--data-dir`` elsewhere built its whole data
    cache again in ``data/`` (hours for a large corpus) when scored or resumed without it."""
    from nmt.data.download import default_data_dir

    if given is not None:
        return Path(given)
    if run_dir is not None and not environment.read("NMT_DATA_DIR"):
        recorded = _recorded_folder(run_dir, DATA_DIR_KEY)
        if recorded is not None:
            return recorded
    return default_data_dir()


def read_corpus_record(run_dir: Path) -> dict[str, Any] | None:
    """The identity a run recorded; None for a run made before runs recorded it."""
    return _record(Path(run_dir) / CORPUS_FILE, DataError,
                   "the corpus identity an nmt run records", "corpus", dict)


def _what(identity: dict[str, Any]) -> str:
    return (f"{identity.get('corpus')} ({identity.get('source')}->{identity.get('target')}, "
            f"sha256 {str(identity.get('sha256'))[:12]}...)")


def check_same_data(run_dir: Path, prepared: dict[str, Any], split: str) -> None:
    """A one-line error when ``split`` of the prepared data does not come from the data the run
    in ``run_dir`` was trained on (an old run without a record is not checked)."""
    record = read_corpus_record(run_dir)
    if record is None:
        return
    for part in ("corpus", split if split in ("valid", "test") else "corpus"):
        was, now = record.get(part, record["corpus"]), prepared.get(part, prepared["corpus"])
        if any(was.get(k) != now.get(k) for k in ("sha256", "source", "target")):
            raise DataError(f"{option('split')} {split}: {run_dir} was trained on {_what(was)}, "
                            f"but the data prepared now is {_what(now)}; score it on the data it "
                            "was trained on (--data-dir), or on files with --src and --ref")


SOURCE_COUNTS = ("read", "kept", "train_pairs", "train_pairs_weighted")


@dataclass(frozen=True)
class Source:
    """One source of a run's data, as a card shows it ("" licence: none was stated)."""

    name: str
    licence: str = ""
    form: str | None = None
    sha256: str | None = None
    files: tuple[str, ...] = ()
    weight: float | None = None
    read: int | None = None
    kept: int | None = None
    filtered: dict[str, int] = field(default_factory=dict)
    train_pairs: int | None = None
    train_pairs_weighted: int | None = None

    @classmethod
    def read_from(cls, f: Fields, counts: Fields | None = None) -> Source:
        """From an identity (``corpus.json``'s, or a ``parent.json`` ancestor's), with the
        counts of ``counts`` where given (a single corpus' ``cleaning``)."""
        c = counts or f
        name = f.text("name", None) if f.has("name") else f.text("corpus", "?")
        return cls(name=file_name(name), licence=f.text("licence", ""),
                   form=f.text("form", None), sha256=f.digest("sha256", None),
                   files=tuple(file_name(x) for x in f.texts("files")),
                   weight=f.number("weight", None, high=1e6, above=True),
                   filtered=c.counts("filtered"),
                   **{k: c.count(k, None) for k in SOURCE_COUNTS})

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["files"] = list(self.files)
        return {k: v for k, v in out.items() if v is not None}


@dataclass(frozen=True)
class TestSet:
    """What a run is scored on: its own held-out ``split``, or a ``file`` the user gave
    (``data.test``), by its name and SHA-256."""

    kind: str  # "split" or "file"
    name: str = ""
    sha256: str | None = None

    @classmethod
    def read_from(cls, f: Fields) -> TestSet:
        kind = f.text("kind")
        if kind not in ("split", "file"):
            raise f.bad("kind", "split or file", kind)
        return cls(kind, file_name(f.text("name", "")), f.digest("sha256", None))

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


def run_data(run_dir: Path, corpus: str) -> tuple[Source, ...] | None:
    """The sources a run trained on, from its ``corpus.json``; None where it recorded none (a
    run made before runs recorded their data; ``corpus``, its config's, is all that is
    known)."""
    record = read_corpus_record(run_dir)
    if record is None:
        return None
    f = Fields(record, Path(run_dir) / CORPUS_FILE, error=DataError)
    sources = f.subs("sources")
    if sources:
        return tuple(Source.read_from(s) for s in sources)
    return (Source.read_from(f.sub("corpus"), f.sub("cleaning", None)),)


def run_test_set(run_dir: Path, test: str) -> TestSet:
    """The test set a run's test scores are of: the file its ``corpus.json`` records as
    ``test``, or (none recorded) the config's ``data.test`` by name, or its own split."""
    record = read_corpus_record(run_dir)
    if record is not None and record.get("test") is not None:
        f = Fields(record, Path(run_dir) / CORPUS_FILE, error=DataError).sub("test")
        name = f.text("name", None) if f.has("name") else f.text("corpus", "?")
        return TestSet("file", file_name(name), f.digest("sha256", None))
    return TestSet("file", file_name(test)) if test else TestSet("split")


# --- scores.test*.json -------------------------------------------------------------------------


@dataclass(frozen=True)
class Score:
    """A test score of one checkpoint, by the engine (and search) that made it."""

    engine: str
    bleu: float
    chrf: float
    beam: int = 1
    sentences: int | None = None
    references: int | None = None
    bleu_signature: str = ""
    chrf_signature: str = ""

    @classmethod
    def read_from(cls, engine: str, f: Fields, multi: Fields) -> Score:
        return cls(engine, round(multi.number("bleu", high=100), 2),
                   round(multi.number("chrf", high=100), 2), f.count("beam", 1, 1, 10_000),
                   f.count("sentences", None), multi.count("references", None, 1, 10_000),
                   multi.text("bleu_signature", ""), multi.text("chrf_signature", ""))

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "engine" and v is not None}


def test_scores(run_dir: Path, checkpoint: str) -> dict[str, Score]:
    """The newest test scores of ``checkpoint`` (``best.pt``) by the engine that made them
    (``nmt``, ``ct2-int8``, ``beam5``, ...): each file that scored it read and checked."""
    found: dict[str, Score] = {}
    for path in split_scores_files(run_dir):
        report = read_json(path, CheckpointError, "the scores nmt bleu writes")
        f = Fields(report, path)
        if f.text("checkpoint", "") != checkpoint:
            continue
        engine = Fields({"file": scores_engine(path)}, path).text("file", cap=60)
        found[engine] = Score.read_from(engine, f, f.sub("multi"))
    return found


# --- the hardware: a checkpoint's "hardware" ----------------------------------------------------


def hardware_record(device: str, name: str, processes: int) -> dict[str, Any]:
    """What a checkpoint records of the hardware its invocation of ``nmt train`` ran on."""
    return {"device": device, "name": name, "processes": processes}


def checkpoint_hardware(payload: dict[str, Any], path: Path) -> str:
    """The hardware the checkpoint ``path`` (its ``payload``) was last trained on (``cpu (Some
    CPU, 2 threads)``), or :data:`NOT_RECORDED` for one saved before checkpoints recorded it."""
    if payload.get("hardware") is None:
        return NOT_RECORDED
    f = Fields(payload, path).sub("hardware")
    device, name = f.text("device", cap=60), f.text("name", "")
    processes = f.count("processes", 1, 1, 1 << 20)
    what = f"{device} ({name})" if name else device
    return what if processes == 1 else f"{what}, {processes} processes"


# --- parent.json -------------------------------------------------------------------------------


def read_parent(run_dir: Path) -> dict[str, Any] | None:
    """A run's ``parent.json`` (None: it was not continued from another)."""
    return _record(Path(run_dir) / PARENT_FILE, CheckpointError,
                   "the parent an nmt run records", "run", str)


@dataclass(frozen=True)
class Ancestor:
    """A run another descends from, as its descendants' ``parent.json`` records it: which run
    and checkpoint, its data (None: not recorded), its test set and its test scores."""

    run: str
    checkpoint: str
    step: int | None = None
    sha256: str | None = None
    data: tuple[Source, ...] | None = None
    test_set: TestSet | None = None
    scores: dict[str, Score] = field(default_factory=dict)

    @classmethod
    def read_from(cls, f: Fields) -> Ancestor:
        from nmt.runs.layout import check_run_name

        run = f.text("run")
        try:
            check_run_name(run)
        except NmtError:
            raise f.bad("run", "a run's name (a directory name)", run) from None
        data = None if f.table.get("data") is None else tuple(
            Source.read_from(s) for s in f.subs("data"))
        test_set = f.sub("test_set", None)
        scores = f.sub("scores", None)
        return cls(run, f.text("checkpoint", "?"), f.count("step", None),
                   f.digest("sha256", None), data,
                   None if test_set is None else TestSet.read_from(test_set),
                   {} if scores is None else _scores(scores))

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, "checkpoint": self.checkpoint, "step": self.step,
                "sha256": self.sha256,
                "data": None if self.data is None else [s.to_dict() for s in self.data],
                "test_set": None if self.test_set is None else self.test_set.to_dict(),
                "scores": {e: s.to_dict() for e, s in self.scores.items()}}


def _scores(table: Fields) -> dict[str, Score]:
    """A table of scores by engine, as an ancestor records them."""
    if len(table.table) > 20:
        raise table.bad("", "at most 20 scores", table.table)
    out = {}
    for engine in table.table:
        if not (engine.isprintable() and 0 < len(engine) <= 60):
            raise table.bad("", "engines named in printable text on one line", engine)
        score = table.sub(engine)
        out[engine] = Score.read_from(engine, score, score)
    return out


def run_ancestors(run_dir: Path) -> tuple[Ancestor, ...]:
    """The runs ``run_dir`` descends from, its parent first: as its ``parent.json`` lists them
    (``ancestors``), or, one made before it did, the parent alone (its data not recorded)."""
    path = Path(run_dir) / PARENT_FILE
    record = read_parent(run_dir)
    if record is None:
        return ()
    f = Fields(record, path)
    listed = f.subs("ancestors", cap=MAX_ANCESTORS)
    if listed:
        return tuple(Ancestor.read_from(a) for a in listed)
    return (Ancestor.read_from(Fields({k: record.get(k) for k in ("run", "checkpoint", "step",
                                                                    "sha256")}, path)),)


def ancestor(run_dir: Path, name: str, checkpoint: str, step: int | None,
             sha256: str | None, test: str, corpus: str) -> Ancestor:
    """``run_dir`` as its children record it: its data, test set and test scores read (and
    checked) from its records. ``test`` and ``corpus``: its config's ``data.test`` and
    ``data.corpus``."""
    data = run_data(run_dir, corpus)
    return Ancestor(name, checkpoint, step, sha256, data, run_test_set(run_dir, test),
                    test_scores(run_dir, checkpoint))


def ancestry_record(parent: Ancestor, parent_dir: Path) -> list[dict[str, Any]]:
    """What a child's ``parent.json`` lists as ``ancestors``: ``parent``, then the runs it
    descends from."""
    return [parent.to_dict(), *(a.to_dict() for a in run_ancestors(parent_dir))][:MAX_ANCESTORS]


# --- what an export may hold of a run ----------------------------------------------------------


def without_paths(value: Any) -> Any:
    """``value`` (JSON data, a config's tables) with every text that holds a path cut to its
    last part: what a run records of the user's folders stays on the user's machine."""
    if isinstance(value, dict):
        return {k: without_paths(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [without_paths(v) for v in value]
    if isinstance(value, str) and ("/" in value or "\\" in value):
        return file_name(value)
    return value


def write_portable_records(run_dir: Path, checkpoint: str, dest: Path) -> None:
    """Into the run copy ``dest`` (its checkpoint ``best.pt``): ``run_dir``'s data and parent
    records, the sources its training left out (so a model continued from the export keeps its
    ancestors' held-out sentences out of training too) and the test scores of ``checkpoint``,
    without a local path."""
    from nmt.runs.layout import scores_file

    excluded = read_excluded(run_dir)
    if excluded is not None:
        write_excluded(dest, excluded)
    for name, read in ((CORPUS_FILE, read_corpus_record), (PARENT_FILE, read_parent)):
        record = read(run_dir)
        if record is not None:
            record = {k: v for k, v in record.items()
                      if k not in (DATA_DIR_KEY, WORKING_DIR_KEY)}  # this machine's
            atomic_write_text(dest / name, json.dumps(without_paths(record), indent=1) + "\n")
    for engine, score in test_scores(run_dir, checkpoint).items():
        fields = score.to_dict()
        multi = {k: fields.pop(k) for k in ("bleu", "chrf", "bleu_signature", "chrf_signature",
                                            "references") if k in fields}
        tag = "test" if engine == "nmt" else f"test.{engine}"
        atomic_write_text(scores_file(dest, tag), json.dumps(
            {"checkpoint": "best.pt", **fields, "multi": multi}, indent=1) + "\n")


def write_excluded(run_dir: Path, excluded: HeldOutSources) -> None:
    """Record the sources ``run_dir``'s training split left out (:data:`EXCLUDED_FILE`)."""
    atomic_write_text(Path(run_dir) / EXCLUDED_FILE, excluded.to_text())


def read_excluded(run_dir: Path) -> HeldOutSources | None:
    """The sources a run's training split left out (None: it left none out), read as every
    stored file is (:func:`nmt.files.read_stored_text`: a FIFO or a link out of the run is
    refused in one line)."""
    from nmt.data.split import HeldOutSources

    path = Path(run_dir) / EXCLUDED_FILE
    if not path.exists() and not path.is_symlink():
        return None
    try:
        return HeldOutSources.from_text(read_stored_text(path, Path(run_dir)))
    except ValueError as e:
        raise DataError(f"{path}: unreadable ({first_line(e, 120)}); expected the sources "
                        "the run's training split left out, as nmt train writes them") from None
