"""An Argos Translate data package, the corpus form of argos-train and Locomotive, as
argos-train's data index links them: ``data.corpus = "data-europarl-en_de.argosdata"``, a zip
holding one folder with ``source`` and ``target`` (aligned lines, as :mod:`.aligned` reads
them), a ``metadata.json`` that names their languages (``from_code``, ``to_code``) and the
corpus (``name``, ``reference``), and a README and a LICENSE.

The two files are read straight out of the archive, a piece at a time, never unpacked, with the
bounds of :mod:`nmt.data.compressed`. Their languages are matched to ``data.source`` and
``data.target`` by the language-tag rule (:func:`nmt.data.languages.same_language`), in either
direction: an ``en_de`` package trains German to English too. The package unpacked (a folder
with ``source``, ``target`` and ``metadata.json``) is read alike, and so is Locomotive's local
dataset, a folder with ``source.txt`` and ``target.txt`` (without a ``metadata.json``:
``data.source``'s and ``data.target``'s, in that order). As for OPUS, the package's terms
are in its LICENSE; nmt does not guess a licence from it (``licence`` in ``[[data.sources]]``
states it for an export's card).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from nmt.config import DataConfig
from nmt.data.corpora.aligned import aligned_files, aligned_members
from nmt.data.corpora.base import Context, Corpus, opener, reading_zip, resolve
from nmt.data.languages import same_language
from nmt.errors import DataError, named, os_reason, shown
from nmt.files import open_stored

SUFFIX = ".argosdata"
MAX_METADATA_BYTES = 1 << 20  # a few hundred bytes in every package


def _read(path: Path, label: str) -> tuple[dict[str, object], zipfile.ZipInfo, zipfile.ZipInfo]:
    """The package's metadata and its ``source`` and ``target`` members: one folder holding
    the three (a one-line :class:`DataError` otherwise)."""
    with reading_zip(label), zipfile.ZipFile(path) as z:
        names = {info.filename: info for info in z.infolist()}
        folders = sorted({n.rsplit("/", 1)[0] for n in names if n.endswith("/metadata.json")
                          and n.count("/") == 1})
        if len(folders) != 1:
            raise DataError(f"{label}: expected one folder holding metadata.json, source "
                            f"and target (an Argos data package), found {len(folders)}")
        folder = folders[0]
        missing = [f for f in ("source", "target") if f"{folder}/{f}" not in names]
        if missing:
            raise DataError(f"{label}: {named(folder)} has no {' or '.join(missing)} file "
                            "(an Argos data package holds source and target)")
        info = names[f"{folder}/metadata.json"]
        if info.file_size > MAX_METADATA_BYTES:
            raise DataError(f"{label}: {named(folder)}/metadata.json of {info.file_size:,} "
                            f"bytes; expected at most {MAX_METADATA_BYTES:,}")
        with z.open(info) as f:
            raw = f.read(MAX_METADATA_BYTES + 1)
        return (_metadata(raw, f"{label}:{named(folder)}/metadata.json"),
                names[f"{folder}/source"], names[f"{folder}/target"])


def _metadata(raw: bytes, where: str) -> dict[str, object]:
    try:
        meta = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        meta = None
    if not isinstance(meta, dict) or not all(
            isinstance(meta.get(k), str) and meta[k] for k in ("from_code", "to_code")):
        raise DataError(f"{where}: expected a JSON object with from_code and to_code (the "
                        "languages of source and target)")
    return meta


# the two files of an unpacked package: argos-train's names, Locomotive's (its local datasets)
FOLDER_FILES = (("source", "target"), ("source.txt", "target.txt"))


def _folder_files(path: Path) -> tuple[Path, Path] | None:
    return next(((path / s, path / t) for s, t in FOLDER_FILES
                 if (path / s).is_file() and (path / t).is_file()), None)


def _swapped(meta: dict[str, object], cfg: DataConfig, label: str) -> bool:
    """Whether the package's (source, target) languages, ``from_code`` and ``to_code`` of its
    ``meta``, are the config's the other way round (a one-line error when neither way)."""
    have = (str(meta["from_code"]), str(meta["to_code"]))
    if same_language(have[0], cfg.source) and same_language(have[1], cfg.target):
        return False
    if same_language(have[1], cfg.source) and same_language(have[0], cfg.target):
        return True
    raise DataError(f"{label}: a package of {shown(have[0], 20)} -> {shown(have[1], 20)} (its "
                    f"metadata.json), not {cfg.source!r} and {cfg.target!r} (data.source, "
                    "data.target)")


class ArgosData:
    name = "argos-data"

    def claims(self, spec: str, ctx: Context) -> bool:
        if spec.lower().endswith(SUFFIX):
            return True
        path = resolve(spec, ctx.option)
        return path.is_dir() and _folder_files(path) is not None

    def open(self, spec: str, ctx: Context) -> Corpus:
        path = resolve(spec, ctx.option)
        label, cfg = str(path), ctx.cfg
        if path.is_dir():
            return self._folder(spec, path, ctx)
        opener(path, label)  # missing, a FIFO: one line
        meta, source, target = _read(path, label)
        members = (target, source) if _swapped(meta, cfg, label) else (source, target)
        return aligned_members(self.name, spec, path, members, ctx)

    def _folder(self, spec: str, path: Path, ctx: Context) -> Corpus:
        """An unpacked package, or Locomotive's local dataset (``source.txt``, ``target.txt``):
        languages from its ``metadata.json`` when it has one, else ``data.source`` and
        ``data.target`` in that order."""
        files = _folder_files(path)
        if files is None:
            raise DataError(f"{path}: no source and target files (nor source.txt and "
                            "target.txt) in this folder")
        meta_path = path / "metadata.json"
        if meta_path.exists():
            with open_stored(meta_path, None, DataError) as f:  # a file, not a FIFO
                try:
                    raw = f.read(MAX_METADATA_BYTES + 1)
                except OSError as e:
                    raise DataError(f"{meta_path}: cannot read ({os_reason(e)})") from None
            if _swapped(_metadata(raw, str(meta_path)), ctx.cfg, str(path)):
                files = (files[1], files[0])
        return aligned_files(self.name, spec, files, ctx)


FORM = ArgosData()
