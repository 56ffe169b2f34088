"""A portable copy of a run inside an export (``nmt export --with-checkpoint``), so that whoever
receives the export or its Argos package can continue the model (``nmt train --from``).

An ``.argosmodel`` holds only the CTranslate2 conversion, which cannot be trained further
(argos-train #12). With ``--with-checkpoint`` the export's folder :data:`RUN_COPY` is a small
run directory: the exported checkpoint as ``checkpoints/best.pt``, the tokenizer, the config,
the run's ``corpus.json`` and ``parent.json`` when it has them and the checkpoint's test scores
(so a continued model's card can name its data, lineage and scores). None of them holds a local
path: what names the user's folders (the config's and the checkpoint's data paths, the records'
files) is cut to file names (:func:`nmt.runs.records.without_paths`). ``nmt train --from``
takes an export directory, an unpacked Argos package or the ``.argosmodel`` file itself
(:func:`open_run_copy`), of which only these files are unpacked, each within a bound the others
set (:func:`file_bound`, :func:`checkpoint_bound`); a copy on disk is held to the same bounds
(:func:`check_sizes`).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from nmt.data.download import ZIP_ERRORS, zip_problem
from nmt.data.tokenizers import FILES as TOKENIZER_FILES
from nmt.data.tokenizers import META_FILE as TOKENIZER_META
from nmt.errors import CheckpointError, NmtError, named, os_reason
from nmt.files import Temporary, read_stored_text
from nmt.runs.layout import (
    CHECKPOINTS_DIR,
    CONFIG_FILE,
    CORPUS_FILE,
    EXCLUDED_FILE,
    PARENT_FILE,
    TOKENIZER_DIR,
)

if TYPE_CHECKING:
    from nmt.runs.loading import LoadedRun

RUN_COPY = "nmt-run"
META_FILE = "nmt-export.json"  # an export's metadata (nmt.export.ct2_directory reads it whole)
RECORDS = (CONFIG_FILE, CORPUS_FILE, PARENT_FILE, EXCLUDED_FILE)  # unpacked when the copy has
# them
CHECKPOINT = f"{CHECKPOINTS_DIR}/best.pt"  # the checkpoint of a run copy

# What each file of a run copy may hold: a package is unpacked (and a copy on disk read) only
# within these, so a member of zeros that deflates a thousandfold fills no disk
RECORD_BYTES = 2**20  # the records, tokenizer.json and the export's nmt-export.json
EXCLUDED_BYTES = 64 * 2**20  # the sources left out: 17 bytes a sentence, about 4 million
TOKENIZER_BYTES = 64 * 2**20  # a SentencePiece model or word list (2**20 pieces: about 30 MB)
CHECKPOINT_COPIES = 4  # a checkpoint holds the weights, their moving average, Adam's two moments
CHECKPOINT_MARGIN = 64 * 2**20  # ... and its RNG states, config, progress and zip layout
MAX_COPY_BYTES = 8 * 2**30  # the checkpoint at most, whatever its config describes


def write_run_copy(run: LoadedRun, export_dir: Path) -> Path:
    """``export_dir/nmt-run``: the run's exported checkpoint as ``checkpoints/best.pt``, its
    tokenizer and its records. Returns the folder."""
    from nmt.config import from_dict
    from nmt.runs.checkpoint import load_checkpoint, save_checkpoint
    from nmt.runs.records import without_paths, write_portable_records

    dest = export_dir / RUN_COPY
    (dest / CHECKPOINTS_DIR).mkdir(parents=True)
    payload = load_checkpoint(run.checkpoint_path)
    payload["config"] = without_paths(payload["config"])
    save_checkpoint(dest / CHECKPOINTS_DIR / "best.pt", payload)
    shutil.copytree(run.run_dir / TOKENIZER_DIR, dest / TOKENIZER_DIR)
    config = from_dict(without_paths(run.config.to_dict()), where=str(run.run_dir), saved=True)
    (dest / CONFIG_FILE).write_text(config.to_toml(), encoding="utf-8")
    write_portable_records(run.run_dir, run.checkpoint_path.name, dest)
    return dest


def find_run_copy(path: Path) -> Path | None:
    """The run copy inside an export directory or an unpacked Argos package (its ``model/``,
    or the one folder a package unpacks to), or None."""
    for candidate in (path / RUN_COPY, path / "model" / RUN_COPY):
        if candidate.is_dir():
            return candidate
    inner = [p for p in path.iterdir() if p.is_dir()] if path.is_dir() else []
    if len(inner) == 1 and (inner[0] / "model" / RUN_COPY).is_dir():
        return inner[0] / "model" / RUN_COPY
    return None


def is_export(path: Path) -> bool:
    """Whether the folder ``path`` is an export, or an unpacked Argos package of one."""
    return (path / META_FILE).is_file() or (path / "model" / META_FILE).is_file()


def exported_run_name(run_copy: Path) -> str:
    """The exported run's own name, as the export beside ``run_copy`` records it ("" where it
    cannot be read: the folder's name, nmt-run, says nothing)."""
    path = run_copy.parent / META_FILE
    try:
        if not path.is_file() or path.stat().st_size > RECORD_BYTES:
            return ""
        recorded = json.loads(read_stored_text(path, run_copy.parent))
    except (OSError, NmtError, ValueError, RecursionError):
        return ""
    name = recorded.get("run") if isinstance(recorded, dict) else None
    return name if isinstance(name, str) else ""


def file_bound(name: str) -> int | None:
    """The most bytes the file ``name`` of a run copy (``/``-separated, relative to the copy)
    may hold, its checkpoint aside (:func:`checkpoint_bound`); None for a name that is no file
    of a run copy."""
    folder, _, file = name.partition("/")
    if name == EXCLUDED_FILE:
        return EXCLUDED_BYTES
    if name in RECORDS or (folder == "tokenizer" and file == TOKENIZER_META):
        return RECORD_BYTES
    if folder == "tokenizer" and file in TOKENIZER_FILES:
        return TOKENIZER_BYTES
    return None


def checkpoint_bound(run_copy: Path) -> int:
    """The most bytes the checkpoint of ``run_copy`` (or of a run) may hold, by what its other
    files declare: :data:`CHECKPOINT_COPIES` times the weights of the model its ``config.toml``
    describes over its tokenizer's vocabularies, plus :data:`CHECKPOINT_MARGIN`; at most
    :data:`MAX_COPY_BYTES`."""
    from nmt.config import load_config
    from nmt.runs.loading import model_bytes, run_tokenizer

    config = run_copy / "config.toml"
    weights = model_bytes(load_config(config, saved=True).model, run_tokenizer(run_copy),
                          str(config))
    return min(MAX_COPY_BYTES, CHECKPOINT_COPIES * weights + CHECKPOINT_MARGIN)


def _too_large(what: str, bound: int, name: str) -> CheckpointError:
    """``what`` (a file or a member, and how many bytes it holds) is more than the ``bound`` of
    the run copy's file ``name``."""
    why = (f"a checkpoint of the model its config.toml describes may hold ({CHECKPOINT_COPIES} "
           f"times its weights, plus {CHECKPOINT_MARGIN // 2**20} MiB)" if name == CHECKPOINT
           else f"a run copy's {name} may hold")
    return CheckpointError(f"{what}, more than the {bound:,} bytes {why}")


def check_sizes(run_dir: Path, checkpoint: Path) -> None:
    """The files of the run (or run copy) ``run_dir`` that ``nmt train --from`` reads, and its
    ``checkpoint``, each within its bound (:func:`file_bound`, :func:`checkpoint_bound`),
    checked from their sizes before any is read."""
    for name in (*RECORDS, *(f"tokenizer/{file}" for file in TOKENIZER_FILES)):
        path, bound = run_dir / name, file_bound(name)
        if bound is not None and path.is_file() and path.stat().st_size > bound:
            raise _too_large(f"{path}: holds {path.stat().st_size:,} bytes", bound, name)
    bound, size = checkpoint_bound(run_dir), checkpoint.stat().st_size
    if size > bound:
        raise _too_large(f"{checkpoint}: holds {size:,} bytes", bound, CHECKPOINT)


class UnpackedCopy:
    """The run copy of an ``.argosmodel`` package, unpacked into a temporary folder
    (:attr:`root`) that is removed with this object or by :meth:`cleanup`. Errors raised in
    :meth:`speaking` name its files as the package's members, not as the temporary folder."""

    def __init__(self, package: Path, folder: str) -> None:
        self.package = package
        self.folder = folder  # the members' folder the run copy is in: TOP/model
        self._holder = Temporary(Path(tempfile.gettempdir()), "nmt-from-")  # a dead one's: gone
        self.root = Path(self._holder.name) / RUN_COPY

    def cleanup(self) -> None:
        self._holder.cleanup()

    def named(self, text: str) -> str:
        """``text`` with the temporary folder's paths said as the package's members."""
        tmp, given = self._holder.name, f"{self.package}: {self.folder}"
        return text.replace(f"{tmp}/", f"{given}/").replace(tmp, given)

    @contextmanager
    def speaking(self) -> Iterator[None]:
        try:
            yield
        except NmtError as e:
            if self._holder.name not in str(e):
                raise
            raise type(e)(self.named(str(e))) from None


def open_run_copy(package: Path, where: str) -> UnpackedCopy:
    """The run copy of the ``.argosmodel`` file ``package``, unpacked: only the files a run copy
    holds (:func:`file_bound`: the records, the tokenizer's files; then the checkpoint,
    :func:`checkpoint_bound`) and the export's ``nmt-export.json`` beside them, each refused
    beyond its bound from its declared size and again as it is written; any other member is
    never read. ``where`` (``--from PACKAGE``) starts the error messages."""
    try:
        with zipfile.ZipFile(package) as z:
            folder, members = _run_copy_members(z, where)
            copy = UnpackedCopy(package, folder)
            try:
                with copy.speaking():
                    for name, info in sorted(members.items()):
                        bound = file_bound(name)
                        if bound is not None:  # the checkpoint last, bounded by these
                            _unpack(z, info, copy.root / name, name, bound, where)
                    if f"{folder}/{META_FILE}" in z.NameToInfo:  # it names the exported run
                        _unpack(z, z.getinfo(f"{folder}/{META_FILE}"),
                                copy.root.parent / META_FILE, META_FILE, RECORD_BYTES, where)
                    _unpack(z, members[CHECKPOINT], copy.root / CHECKPOINT, CHECKPOINT,
                            checkpoint_bound(copy.root), where)
            except BaseException:
                copy.cleanup()
                raise
    except ZIP_ERRORS as e:
        raise CheckpointError(f"{where}: cannot read the package: {zip_problem(e)}") from None
    except OSError as e:
        raise CheckpointError(f"{where}: cannot read the package ({e})") from None
    return copy


def _run_copy_members(z: zipfile.ZipFile, where: str) -> tuple[str, dict[str, zipfile.ZipInfo]]:
    """The folder of ``z`` that holds the run copy (``TOP/model``) and the copy's members by
    their names inside it: the files a run copy holds, nothing else."""
    copies: dict[str, dict[str, zipfile.ZipInfo]] = {}
    for info in z.infolist():
        parts = info.filename.split("/")
        if len(parts) < 4 or parts[1:3] != ["model", RUN_COPY] or info.is_dir():
            continue
        name = "/".join(parts[3:])
        if name == CHECKPOINT or file_bound(name) is not None:
            copies.setdefault(f"{parts[0]}/model", {})[name] = info
    found = sorted(folder for folder, members in copies.items() if CHECKPOINT in members)
    if not found:
        raise CheckpointError(f"{where}: this package holds no checkpoint; continuing it needs "
                              "one exported with nmt export --to argos --with-checkpoint")
    if len(found) > 1:
        raise CheckpointError(f"{where}: holds {len(found)} run copies "
                              f"({named(found[0])}/{RUN_COPY}, {named(found[1])}/{RUN_COPY}); "
                              "expected the one folder of a package "
                              "nmt export wrote")
    return found[0], copies[found[0]]


def _unpack(z: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path, name: str, bound: int,
            where: str) -> None:
    """Write the member ``info`` to ``target``, refused before anything is written when its
    header says it holds more than ``bound`` bytes (``zipfile`` reads no more than the header
    says: a member holding more fails its CRC-32 check there)."""
    if info.file_size > bound:
        raise _too_large(f"{where}: {info.filename} unpacks to {info.file_size:,} bytes", bound,
                         name)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with z.open(info) as src, target.open("wb") as dst:
            shutil.copyfileobj(src, dst, 2**20)
    except OSError as e:
        raise CheckpointError(f"{where}: cannot unpack {info.filename} into "
                              f"{tempfile.gettempdir()} ({os_reason(e)}); set TMPDIR to a "
                              "folder with room") from None
