"""The directory an export to CTranslate2 is: what it holds (``nmt-export.json`` and its format,
the vocabulary CTranslate2 stores), which existing directory an export may replace, and the
export of a run made on the fly for ``--engine ctranslate2``. No torch: reading an export is on
the CTranslate2 path, which does not import it.
"""

from __future__ import annotations

import fnmatch
import glob
import json
import os
from pathlib import Path
from typing import Any, NamedTuple

from nmt.arguments import option
from nmt.data.tokenizers import SPECIALS, Tokenizer
from nmt.errors import CheckpointError, DataError, NmtError, named, shown
from nmt.files import Temporary, read_stored_text, swap_in
from nmt.runs.layout import EXPORTS_DIR
from nmt.runs.portable import META_FILE as META_FILE  # the metadata's name, shared with --from
from nmt.runs.portable import RUN_COPY  # the folder --with-checkpoint adds to an export

FORMAT = "nmt-ctranslate2-1"
# What CTranslate2's return_attention gives for an export that records it as its "attention":
# the last decoder layer's encoder-decoder heads averaged, the weights nmt reads of its own
# model (nmt.translation.alignment); an export made before gives the first head alone, and
# places tags by position
ATTENTION = "last-layer-mean"
RUN_EXPORTS = EXPORTS_DIR  # exports made on the fly live in RUN/ctranslate2/<checkpoint>/


def vocabulary(tokenizer: Tokenizer, side: str) -> list[str]:
    """The tokens of ``side`` (``"src"`` or ``"tgt"``) in id order, as CTranslate2 stores them.

    SentencePiece pieces, or the words of a word-level vocabulary. CTranslate2 maps tokens to
    ids by their text, so every token must be distinct (a :class:`DataError` otherwise).
    """
    tokens = tokenizer.pieces(side)
    if tuple(tokens[: len(SPECIALS)]) != SPECIALS:
        raise DataError(f"{side} vocabulary: expected {SPECIALS} first, got {tokens[:4]}")
    if len(set(tokens)) != len(tokens):
        raise DataError(f"{side} vocabulary: tokens are not distinct, so CTranslate2 could not "
                        "map them back to ids; this vocabulary cannot be exported")
    return tokens

def checkpoint_stamp(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"checkpoint_size": st.st_size, "checkpoint_mtime_ns": st.st_mtime_ns}


# What an export directory holds (glob patterns): the CTranslate2 model and its vocabularies,
# the tokenizer (tokenizer.json with spm.model, src/tgt.model or the word vocabularies),
# normalize.py, nmt-export.json and the README (and RUN_COPY, a folder, with --with-checkpoint).
# Replacing an export deletes nothing else.
# What CTranslate2 itself reads of an export
CT2_FILES = ("model.bin", "config.json", "shared_vocabulary.json", "source_vocabulary.json",
             "target_vocabulary.json")
EXPORT_ENTRIES = ("model.bin", "config.json", "*vocabulary*", "tokenizer.json", "*.model",
                  "*vocab.txt", "normalize.py", META_FILE, "README.md")


def why_not_an_export(path: Path) -> str | None:
    """Why the existing ``path`` may not be replaced by an export; None when it may: it is an
    empty directory, or one ``nmt export`` wrote (its ``nmt-export.json`` is of :data:`FORMAT`)
    holding nothing else than an export does (:data:`EXPORT_ENTRIES`)."""
    from nmt.runs.directory import is_run_dir

    if not path.is_dir():
        return "exists and is not a directory"
    entries = sorted(path.iterdir())
    if not entries:
        return None
    if is_run_dir(path):
        return "is a run directory, not an export"
    runs = [e for e in entries if e.name != RUN_COPY and is_run_dir(e)]
    if runs:
        return f"holds the run directory {runs[0].name}"
    try:
        meta = json.loads(read_stored_text(path / META_FILE, path, CheckpointError))
    except (NmtError, ValueError, RecursionError):
        meta = None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        return f"is not an nmt export (no {META_FILE} of format {FORMAT})"
    for entry in entries:
        if entry.name == RUN_COPY and entry.is_dir():  # --with-checkpoint's run copy
            continue
        if entry.is_dir() or not any(fnmatch.fnmatchcase(entry.name, pattern)
                                     for pattern in EXPORT_ENTRIES):
            return f"holds {named(entry.name)}, which nmt export did not write"
    return None


def replace_dir(new: Path, target: Path) -> None:
    """Rename ``new`` to ``target``; an existing ``target`` is moved aside first and removed
    only once the new one is in place."""
    if not target.exists():
        os.replace(new, target)
        return
    with temporary_export(target, "old.") as aside:  # removed whatever happens
        swap_in(new, target, aside / target.name)


def temporary_export(target: Path, what: str = "") -> Temporary:
    """A held temporary folder beside the export ``target`` (``.NAME.XXXX.tmp``, and
    ``.NAME.old.XXXX.tmp`` for the export it replaces); those a killed export of ``target``
    left are removed first (:class:`nmt.files.Temporary`)."""
    return Temporary(target.parent, f".{target.name}.{what}", ".tmp",
                     kind=f".{glob.escape(target.name)}.*.tmp")


class RunExport(NamedTuple):
    """A run's on-the-fly export for ``--engine ctranslate2``."""

    run_dir: Path
    checkpoint: Path  # the checkpoint it is made from
    directory: Path  # RUN/ctranslate2/<checkpoint>/
    current: bool  # made from that checkpoint as it is now (else it is to be made again)


def run_export(run_dir: Path | None, checkpoint: str = "best") -> RunExport:
    """Where ``run_dir``'s checkpoint is exported on the fly (``RUN/ctranslate2/<checkpoint>/``)
    and whether the export there is current. A link planted on the way is refused
    (:func:`nmt.runs.directory.check_run_path`): what is replaced stays in the run. Making it
    is :func:`nmt.export.ct2_convert.run_export_dir`'s (converting needs torch; reading not)."""
    from nmt.runs.directory import check_run_path
    from nmt.runs.paths import latest_run, resolve_checkpoint

    run_dir = latest_run() if run_dir is None else Path(run_dir)
    if not run_dir.is_dir():
        raise CheckpointError(f"{option('run')} {run_dir}: run directory not found")
    path = resolve_checkpoint(run_dir, checkpoint)
    target = check_run_path(run_dir, run_dir / RUN_EXPORTS / path.stem)
    meta_path = target / META_FILE
    current = False
    if os.path.lexists(meta_path):
        try:  # a FIFO, a device or a link out of the run is refused, not made again
            meta = json.loads(read_stored_text(meta_path, run_dir, CheckpointError))
        except (ValueError, RecursionError):
            meta = {}
        meta = meta if isinstance(meta, dict) else {}  # damaged: made again
        data: dict[str, Any] = meta["data"] if isinstance(meta.get("data"), dict) else {}
        truncate = data.get("truncate", 0)
        current = (meta.get("format") == FORMAT and meta.get("quantization") == "float32"
                   and isinstance(truncate, int) and meta.get("add_source_eos") == (truncate <= 0)
                   and meta.get("attention") == ATTENTION
                   and all(meta.get(k) == v for k, v in checkpoint_stamp(path).items()))
    return RunExport(run_dir, path, target, current)


def run_export_where(directory: Path) -> str:
    """How messages name the on-the-fly export ``directory`` (the user named no directory)."""
    return f"{directory} (the run's export for --engine ctranslate2)"

def export_directory(path: Path, where: str) -> Path:
    """The export ``--model`` names: an export directory, or the folder of an unpacked Argos
    Translate package (its ``model/`` is the export). A package file (``.argosmodel``, a zip)
    is one line saying what to unpack and pass."""
    import zipfile

    path = Path(path)
    if path.is_file() and zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as z:
                tops = sorted({n.split("/")[0] for n in z.namelist() if "/" in n})
        except (OSError, zipfile.BadZipFile):
            tops = []
        folder = named(tops[0]) if len(tops) == 1 else "FOLDER"
        raise CheckpointError(f"{where}: an Argos Translate package (a zip file); unpack it "
                              f"(unzip {path.name}) and pass the export inside it: --model "
                              f"{folder}/model")
    if path.is_dir() and not (path / META_FILE).exists() and (
            path / "model" / META_FILE).is_file():
        return path / "model"  # an unpacked Argos package
    return path


def read_export(directory: Path, where: str | None = None) -> dict[str, Any]:
    """``nmt-export.json`` of an exported directory (a one-line error if it is not one, starting
    with ``where``: how the user named it, by default ``--model DIRECTORY``)."""
    directory = Path(directory)
    where = where or f"{option('model')} {directory}"
    path = directory / META_FILE
    if not directory.is_dir():
        raise CheckpointError(f"{where}: directory not found")
    if not os.path.lexists(path):
        raise CheckpointError(f"{where}: not an nmt export (no {META_FILE}; make "
                              "one with `nmt export --to ctranslate2`)")
    try:
        meta = json.loads(read_stored_text(path, directory, CheckpointError))
    except (ValueError, RecursionError) as e:
        raise CheckpointError(f"{path}: unreadable ({e})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an nmt export (expected format {FORMAT!r})")
    check_export_meta(meta, path)
    return meta


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def check_export_meta(meta: dict[str, Any], path: Path) -> None:
    """The fields of ``nmt-export.json`` that reading an export uses, with their types and
    bounds, in one place: a one-line :class:`CheckpointError` naming the file and the field
    (``decode`` is checked as a config's ``[decode]`` when it is read)."""
    from nmt.data.languages import known_language
    from nmt.data.normalize import POLICIES

    def bad(field: str, expected: str) -> CheckpointError:
        value: Any = meta
        for part in field.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return CheckpointError(f"{path}: {field}: expected {expected}, got {shown(value, 40)}")

    if not isinstance(meta.get("decode"), dict):
        raise bad("decode", "a table of [decode] settings")
    data = meta.get("data")
    if not isinstance(data, dict):
        raise bad("data", "a table with lowercase, normalization and truncate")
    if not isinstance(data.get("lowercase"), bool):
        raise bad("data.lowercase", "true or false")
    if not (isinstance(data.get("normalization"), str) and data["normalization"] in POLICIES):
        raise bad("data.normalization", f"one of {', '.join(POLICIES)}")
    if not (_is_int(data.get("truncate")) and 0 <= data["truncate"] <= 1 << 20):
        raise bad("data.truncate", "a count >= 0")
    positions = meta.get("max_positions")
    if positions is not None and not (_is_int(positions) and 1 <= positions <= 1 << 24):
        raise bad("max_positions", "a count >= 1 (or null)")
    if not isinstance(meta.get("add_source_eos", True), bool):
        raise bad("add_source_eos", "true or false")
    for key in ("source_language", "target_language"):
        if meta.get(key) is not None and not (isinstance(meta[key], str)
                                              and known_language(meta[key])):
            raise bad(key, "a language code nmt knows")
    tokenizer = meta.get("tokenizer")
    if tokenizer is not None and not (isinstance(tokenizer, dict) and isinstance(
            tokenizer.get("digest", ""), str)):
        raise bad("tokenizer", "a table with the tokenizer's digest")


def check_model_vocabulary(directory: Path, tokenizer: Tokenizer, where: str) -> None:
    """The CTranslate2 model's vocabularies are the tokenizer's pieces, in id order: files of
    another export put beside it are refused in one line instead of decoding wrong ids."""
    names = (("shared_vocabulary.json", "src"),) if (
        directory / "shared_vocabulary.json").is_file() else (
        ("source_vocabulary.json", "src"), ("target_vocabulary.json", "tgt"))
    for name, side in names:
        if not os.path.lexists(directory / name):
            raise CheckpointError(f"{where}: {name} is missing; export the run again")
        try:
            tokens = json.loads(read_stored_text(directory / name, directory, CheckpointError))
        except (ValueError, RecursionError) as e:
            raise CheckpointError(f"{directory / name}: unreadable ({e})") from None
        if tokens != vocabulary(tokenizer, side):
            raise CheckpointError(f"{directory / name}: not the vocabulary of this export's "
                                  "tokenizer (files of another export?); export the run again")
