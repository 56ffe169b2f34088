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
(:func:`open_run_copy`).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from nmt.errors import CheckpointError
from nmt.files import Temporary
from nmt.runs.layout import CHECKPOINTS_DIR, CONFIG_FILE, TOKENIZER_DIR

if TYPE_CHECKING:
    from nmt.runs.loading import LoadedRun

RUN_COPY = "nmt-run"
META_FILE = "nmt-export.json"  # an export's metadata (nmt.export.ct2_directory reads it whole)
MAX_COPY_BYTES = 8 * 2**30  # what an .argosmodel's run copy may unpack to


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
    try:
        recorded = json.loads((run_copy.parent / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return ""
    name = recorded.get("run") if isinstance(recorded, dict) else None
    return name if isinstance(name, str) else ""


def open_run_copy(package: Path, where: str) -> tuple[Path, Temporary]:
    """The run copy of an ``.argosmodel`` file, unpacked into a temporary directory (kept as
    long as the returned object is). Only the members under ``*/model/nmt-run/`` are unpacked
    (and the export's ``nmt-export.json`` beside them), each name checked to stay inside it,
    their total size bounded."""
    try:
        with zipfile.ZipFile(package) as z:
            members = [i for i in z.infolist()
                       if len(PurePosixPath(i.filename).parts) > 3
                       and PurePosixPath(i.filename).parts[1:3] == ("model", RUN_COPY)]
            if not members:
                raise CheckpointError(f"{where}: this package holds no checkpoint; continuing "
                                      "it needs one exported with nmt export --to argos "
                                      "--with-checkpoint")
            if sum(i.file_size for i in members) > MAX_COPY_BYTES:
                raise CheckpointError(f"{where}: its checkpoint unpacks to more than "
                                      f"{MAX_COPY_BYTES // 2**30} GiB")
            holder = Temporary(Path(tempfile.gettempdir()), "nmt-from-")
            root = holder.path / RUN_COPY
            meta = [i for i in z.infolist() if PurePosixPath(i.filename).parts[1:] == (
                "model", META_FILE) and i.file_size < 2**20]
            if meta:  # beside the copy, as in an export: it names the exported run
                (root.parent / META_FILE).write_bytes(z.read(meta[0]))
            for info in members:
                parts = PurePosixPath(info.filename).parts[3:]
                if any(p in ("", ".", "..") for p in parts) or info.filename.startswith("/"):
                    raise CheckpointError(f"{where}: member {info.filename!r} leaves the "
                                          "package's folder")
                target = root.joinpath(*parts)
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with z.open(info) as src, target.open("wb") as dst:
                    shutil.copyfileobj(src, dst)
    except (OSError, zipfile.BadZipFile, EOFError) as e:
        raise CheckpointError(f"{where}: cannot read the package ({e})") from None
    return root, holder
