"""The prepared-data cache: its arrays (:class:`Split`, :class:`Prepared`), its key, and how it
is written (complete or absent) and read back (checked, a damaged one is a :class:`DataError`).

What goes into it is :mod:`nmt.data.prepare`'s; the layout is described there and in
docs/DATA.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import json
import os
import re
import shutil
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nmt.config import DataConfig
from nmt.data.normalize import special_casing
from nmt.data.tokenizers import SPECIALS, UNK_ID, Tokenizer, load_tokenizer
from nmt.errors import DataError, first_line, write_errors
from nmt.files import make_dirs, umask_mode

CACHE_VERSION = 2  # bump when the cache layout or the preparation changes meaning
SPLITS = ("train", "valid", "test")
REJECTED_FILE = "rejected.tsv"  # the pairs the filters removed: filter, source, target
# DataConfig fields that do not change the cached arrays (truncation happens when batching)
_NOT_IN_KEY = {"truncate"}
_TOKENIZER_ONLY = {"sentencepiece": {"min_freq"},
                   "word": {"sp_model_type", "vocab_size", "character_coverage"}}
# Where the data is: the key holds the digests of the content instead, so a moved file keeps
# its cache and an edited one builds a new cache
_PATHS = {"corpus", "valid", "test"}
# Fields added after CACHE_VERSION 2: left out of the key at their defaults, so that the caches
# of the configs that existed before them keep their keys
_ADDED = ("source", "target", "columns", "character_coverage", "case_forms", "sources")
# Fields added with a default that may change the arrays: left out of the key at the value
# that reproduces what came before them (no cap)
_BEFORE = {"valid_size": 0, "test_size": 0, "target_apostrophes": "straight"}


@dataclass
class Split:
    """One encoded split: ragged id sequences stored flat, pair-aligned with their text.

    Sentence ``i`` is ``src_ids[src_offsets[i]:src_offsets[i + 1]]`` (no ``<bos>``/``<eos>``).
    """

    name: str
    src_ids: np.ndarray  # (total src tokens,) int32
    src_offsets: np.ndarray  # (n + 1,) int64
    tgt_ids: np.ndarray  # (total tgt tokens,) int32
    tgt_offsets: np.ndarray  # (n + 1,) int64
    src_text: list[str]  # (n,) normalised source sentences
    tgt_text: list[str]  # (n,) normalised target sentences
    ref_text: list[str]  # (n,) the target as BLEU scores against (see :func:`reference_text`)

    def __len__(self) -> int:
        return len(self.src_offsets) - 1

    def src(self, i: int) -> np.ndarray:
        return self.src_ids[self.src_offsets[i]:self.src_offsets[i + 1]]

    def tgt(self, i: int) -> np.ndarray:
        return self.tgt_ids[self.tgt_offsets[i]:self.tgt_offsets[i + 1]]

    def src_lengths(self) -> np.ndarray:
        """``(n,)`` int64 token counts, without ``<eos>``."""
        return np.diff(self.src_offsets)

    def tgt_lengths(self) -> np.ndarray:
        return np.diff(self.tgt_offsets)

    def grouped(self) -> tuple[list[str], list[list[str]]]:
        """Distinct sources in first-seen order, and all references of each."""
        refs: dict[str, list[str]] = {}
        for s, r in zip(self.src_text, self.ref_text, strict=True):
            refs.setdefault(s, []).append(r)
        return list(refs), list(refs.values())


@dataclass
class Prepared:
    tokenizer: Tokenizer
    splits: dict[str, Split]  # "train", "valid", "test" (valid/test may be empty)
    cache_dir: Path
    digest: str  # SHA-256 of the corpus (Identity.sha256)
    meta: dict[str, Any] = field(default_factory=dict)  # meta.json: config, counts, seconds
    identity: dict[str, Any] = field(default_factory=dict)  # Data.identity(): what a run records


def cache_key(cfg: DataConfig, digest: str, held_out: dict[str, str] | None = None,
              tokenizer: str | None = None) -> str:
    """16 hex digits naming the cache of ``cfg`` on the corpus with SHA-256 ``digest`` (and the
    ``valid`` / ``test`` files with the digests ``held_out``, and the given tokenizer's digest,
    when given)."""
    skip = _NOT_IN_KEY | _PATHS | _TOKENIZER_ONLY.get(cfg.tokenizer, set())
    skip |= {k for k in _ADDED if getattr(cfg, k) == getattr(_DEFAULTS, k)}
    skip |= {k for k, v in _BEFORE.items() if getattr(cfg, k) == v}
    skip |= {f"{k}_size" for k in ("valid", "test") if not getattr(cfg, f"{k}_frac")}  # moot
    if cfg.normalization == "recipe":  # the recipe's rules keep ’ and ‘ on both sides anyway
        skip.add("target_apostrophes")
    if cfg.filters == "none":  # the caches built before filters existed, when none ran
        skip.add("filters")
    if not cfg.langid:  # the same for the language check
        skip.add("langid")
    fields = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in skip}
    if cfg.sources:  # where each is and what it is called are not in the key; its content is
        fields["sources"] = [{"weight": s.weight, "filters": s.filters,
                              **({"back_translated": True} if s.back_translated else {})}
                             for s in cfg.sources]
    content: dict[str, Any] = {"v": CACHE_VERSION, "corpus": digest, "data": fields}
    if special_casing(cfg.source) or special_casing(cfg.target):
        content["casing"] = "dotted-i"  # Turkish/Azerbaijani capitals, added after version 2
    if held_out:
        content["held_out"] = held_out
    if tokenizer:
        content["tokenizer"] = tokenizer
    blob = json.dumps(content, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


_DEFAULTS = DataConfig()


def write_cache(cache_dir: Path, tok: Tokenizer, splits: dict[str, Split],
                      meta: dict[str, Any], rejected: Sequence[tuple[str, str, str]] = ()) -> None:
    """Write the cache into a temporary directory, then rename it into place. A failure (disk
    full) is one line and leaves no partial cache; directories follow the umask like files.
    ``rejected``: the pairs the filters removed, (filter, source, target), for rejected.tsv."""
    make_dirs(cache_dir.parent)
    with write_errors(str(cache_dir)):
        _write_cache(cache_dir, tok, splits, meta, rejected)


def _write_cache(cache_dir: Path, tok: Tokenizer, splits: dict[str, Split],
                 meta: dict[str, Any], rejected: Sequence[tuple[str, str, str]]) -> None:
    tmp = Path(tempfile.mkdtemp(dir=cache_dir.parent, prefix=f".{cache_dir.name}-"))
    try:
        os.chmod(tmp, umask_mode(0o777))  # mkdtemp makes it 0700: a shared data dir would break
        tok.save(tmp)
        for k, sp in splits.items():
            np.savez(tmp / f"{k}.npz", src_ids=sp.src_ids, src_offsets=sp.src_offsets,
                     tgt_ids=sp.tgt_ids, tgt_offsets=sp.tgt_offsets)
            for side, text in (("src", sp.src_text), ("tgt", sp.tgt_text),
                               ("ref", sp.ref_text)):
                # newline="": references as written may hold a lone \r; it stays in its line
                with (tmp / f"{k}.{side}.txt").open("w", encoding="utf-8", newline="") as f:
                    f.write("".join(t + "\n" for t in text))
        with (tmp / REJECTED_FILE).open("w", encoding="utf-8", newline="") as f:
            f.write("filter\tsource\ttarget\n")
            f.write("".join("\t".join(" ".join(x.split()) for x in row) + "\n"
                            for row in rejected))
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        if cache_dir.exists():  # a rebuild, or another process won the race: replace it
            old = cache_dir.with_name(f".{cache_dir.name}-old-{os.getpid()}")
            with contextlib.suppress(FileNotFoundError):  # another rebuild moved it first
                os.replace(cache_dir, old)
            shutil.rmtree(old, ignore_errors=True)
        try:
            os.replace(tmp, cache_dir)
        except OSError as e:
            # another process put its cache of the same key in place between the check above
            # and here: the same arrays (the key says so), complete (renamed into place whole)
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST) or not (
                    cache_dir / "meta.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load_cache(cache_dir: Path) -> Prepared:
    """Read a cache written by :func:`build_cache`, checking everything it reads (the types of
    meta.json, the arrays' dtypes and shapes, every id against the vocabulary): a damaged or
    foreign cache is a :class:`DataError` (which :func:`prepare` answers with a rebuild), never
    a crash here or an out-of-range id in training."""
    meta_path = cache_dir / "meta.json"
    if not meta_path.is_file():
        raise DataError(f"{meta_path}: missing (incomplete cache)")
    meta = _read_meta(meta_path)
    tok = load_tokenizer(cache_dir)
    splits = {}
    for k in SPLITS:
        arrays = _read_arrays(cache_dir / f"{k}.npz")
        src, tgt, ref = (_read_lines(cache_dir / f"{k}.{side}.txt")
                         for side in ("src", "tgt", "ref"))
        sp = Split(k, src_text=src, tgt_text=tgt, ref_text=ref, **arrays)
        _check_split(cache_dir / f"{k}.npz", sp, meta["pairs"][k], tok)
        splits[k] = sp
    return Prepared(tok, splits, cache_dir, meta["corpus_sha256"], meta)


ARRAYS = ("src_ids", "src_offsets", "tgt_ids", "tgt_offsets")


def _read_arrays(path: Path) -> dict[str, np.ndarray]:
    """A split's arrays, each header checked against the bytes its member holds before numpy
    reads it: numpy allocates the shape a header declares first, which is a ``MemoryError`` on
    one machine and, where memory is overcommitted, an allocation that succeeds and a read
    that fails later. A damaged archive is a :class:`DataError` naming the file."""
    try:
        with zipfile.ZipFile(path) as z:
            for name in ARRAYS:
                info = z.getinfo(f"{name}.npy")
                with z.open(info) as f:
                    version = np.lib.format.read_magic(f)
                    read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                                   else np.lib.format.read_array_header_2_0)
                    shape, _, dtype = read_header(f)
                    declared = int(np.prod(shape, dtype=object)) * dtype.itemsize
                    if declared != info.file_size - f.tell():
                        raise DataError(f"{path}: {name} declares {declared:,} bytes of "
                                        f"{dtype} {tuple(shape)}, the file holds "
                                        f"{info.file_size - f.tell():,}")
        with np.load(path, allow_pickle=False) as z:
            return {name: z[name] for name in ARRAYS}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, MemoryError) as e:
        raise DataError(f"{path}: unreadable ({first_line(e, 160)})") from None


def _read_meta(path: Path) -> dict[str, Any]:
    """meta.json, checked field by field against what :func:`build_cache` writes."""
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except RecursionError:
        raise DataError(f"{path}: nested too deeply") from None

    def count(x: Any) -> bool:
        return isinstance(x, int) and not isinstance(x, bool) and x >= 0

    if not isinstance(meta, dict):
        raise DataError(f"{path}: expected a JSON object, got {type(meta).__name__}")
    if type(meta.get("version")) is not int or meta["version"] != CACHE_VERSION:
        raise DataError(f"{path}: cache version {meta.get('version')!r:.20}, "
                        f"expected {CACHE_VERSION}")
    problems = {
        "corpus_sha256": not (isinstance(meta.get("corpus_sha256"), str)
                              and re.fullmatch(r"[0-9a-f]{64}", meta["corpus_sha256"])),
        "data": not isinstance(meta.get("data"), dict),
        "counts": not (isinstance(meta.get("counts"), dict)
                       and all(count(v) for v in meta["counts"].values())),
        "pairs": not (isinstance(meta.get("pairs"), dict)
                      and all(count(meta["pairs"].get(k)) for k in SPLITS)),
        "seconds": not (isinstance(meta.get("seconds"), (int, float))
                        and not isinstance(meta["seconds"], bool)),
        "filtered": not (isinstance(meta.get("filtered", {}), dict)  # absent before filters
                         and all(count(v) for v in meta.get("filtered", {}).values())),
    }
    bad = [key for key, wrong in problems.items() if wrong]
    if bad:
        raise DataError(f"{path}: {bad[0]}: not what a cache holds")
    return meta


def _check_split(path: Path, sp: Split, pairs: int, tok: Tokenizer) -> None:
    """The arrays of one split fit each other, its text files, ``pairs`` and the vocabulary."""
    if not len(sp.src_text) == len(sp.tgt_text) == len(sp.ref_text) == pairs:
        raise DataError(f"{path.parent}: {sp.name} split has inconsistent sizes")
    for side, ids, offsets, vocab in (("src", sp.src_ids, sp.src_offsets, tok.src_vocab_size),
                                      ("tgt", sp.tgt_ids, sp.tgt_offsets, tok.tgt_vocab_size)):
        if not (ids.dtype == np.int32 and ids.ndim == 1 and offsets.dtype == np.int64
                and offsets.shape == (pairs + 1,)):
            raise DataError(f"{path}: {side} arrays: expected int32 ids and {pairs + 1:,} int64 "
                            f"offsets, got {ids.dtype} {ids.shape} and {offsets.dtype} "
                            f"{offsets.shape}")
        if not (offsets[0] == 0 and offsets[-1] == len(ids) and (np.diff(offsets) >= 0).all()):
            raise DataError(f"{path}: {side}_offsets: not a split of the {len(ids):,} ids")
        if len(ids) and not (0 <= ids.min() and ids.max() < vocab):
            raise DataError(f"{path}: {side}_ids: ids from {ids.min()} to {ids.max()}, "
                            f"expected 0 to {vocab - 1} (the vocabulary)")
        if ((ids > UNK_ID) & (ids < len(SPECIALS))).any():  # <pad>, <bos>, <eos>
            raise DataError(f"{path}: {side}_ids: holds <pad>, <bos> or <eos>, which no text "
                            "encodes to")


def _read_lines(path: Path) -> list[str]:
    with path.open(encoding="utf-8", newline="") as f:
        return f.read().split("\n")[:-1]
