"""The prepared-data cache: its arrays (:class:`Split`, :class:`Prepared`), its key, and how it
is written (complete or absent) and read back (checked, a damaged one is a :class:`DataError`).

A split is written as its pairs come (:class:`SplitWriter`: text a line at a time, ids a chunk
at a time, into ``.npy`` files) and read back memory-mapped, its text read when it is iterated:
neither preparing nor training holds a corpus-sized array or text in memory.

What goes into it is :mod:`nmt.data.prepare`'s; the layout is described there and in
docs/DATA.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import itertools
import json
import mmap
import os
import re
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

import numpy as np

from nmt.config import DataConfig
from nmt.data.filters import parse as parse_filters
from nmt.data.hash_buckets import Column, HashBuckets
from nmt.data.normalize import special_casing
from nmt.data.spool import text_hash
from nmt.data.tokenizers import SPECIALS, UNK_ID, Tokenizer, load_tokenizer
from nmt.errors import DataError, first_line, os_reason, shown, write_errors
from nmt.files import (
    Temporary,
    make_dirs,
    open_stored,
    read_stored_text,
    stored_digest,
    swap_in,
)

CACHE_VERSION = 4  # the layout of meta.json and the files; bump when it changes (4: the
# files' digests in meta.json; an older cache is rebuilt)
KEY_VERSION = 9  # in the key: bump when the prepared pairs or the key change meaning (a new
# cache for all; 3: every setting that changes the arrays is in the key, whatever its value;
# 4: the span rules the filters and the augmentation read changed; 5: nonalnum and brackets
# keep symbols and brackets that both sides have; 6: words of scripts without spaces counted
# as words of the same length, max_words counts words with a letter or digit, script leaves
# out words both sides have, and span augmentation cuts words where the script changes; 7:
# options, paths, addresses, variables and terms end where a script without spaces starts;
# 8: a pointer conversion with an extension, ``%pB``, is one printf span; 9: repeated_chars
# keeps a run of one character that both sides have)
SPLITS = ("train", "valid", "test")
REJECTED_FILE = "rejected.tsv"  # the pairs the filters removed: filter, source, target
# DataConfig fields that do not change the cached arrays (truncation happens when batching;
# the protected spans are kept at translation, and change the arrays only where filters judge
# the text around them: then data.spans is in the key, cache_key)
_NOT_IN_KEY = {"truncate", "spans", "glossary", "terms"}
_TOKENIZER_ONLY = {"sentencepiece": {"min_freq"},
                   "word": {"sp_model_type", "vocab_size", "character_coverage", "sp_sentences",
                            "sp_characters", "byte_fallback", "span_pieces"}}
# Where the data is: the key holds the digests of the content instead, so a moved file keeps
# its cache and an edited one builds a new cache
_PATHS = {"corpus", "valid", "test"}


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
    src_text: Sequence[str]  # (n,) normalised source sentences
    tgt_text: Sequence[str]  # (n,) normalised target sentences
    ref_text: Sequence[str]  # (n,) the target as BLEU scores against (``reference_text``)

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
              tokenizer: str | None = None, excluded: str | None = None) -> str:
    """16 hex digits naming the cache of ``cfg`` on the corpus with SHA-256 ``digest`` (and the
    ``valid`` / ``test`` files with the digests ``held_out``, the given tokenizer's digest, and
    the digest of the sources its training split leaves out, when given)."""
    skip = _NOT_IN_KEY | _PATHS | _TOKENIZER_ONLY.get(cfg.tokenizer, set())
    skip |= {f"{k}_size" for k in ("valid", "test") if not getattr(cfg, f"{k}_frac")}  # moot
    if cfg.normalization == "recipe":  # the recipe's rules keep ’ and ‘ on both sides anyway
        skip.add("target_apostrophes")
    if filtering(cfg):  # the filters judge the text around the spans of data.spans
        skip.discard("spans")
    fields = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in skip}
    if cfg.sources:  # where each is and what it is called are not in the key; its content is
        fields["sources"] = [{"weight": s.weight, "filters": s.filters,
                              **({"back_translated": True} if s.back_translated else {})}
                             for s in cfg.sources]
    content: dict[str, Any] = {"v": KEY_VERSION, "corpus": digest, "data": fields}
    if special_casing(cfg.source) or special_casing(cfg.target):
        content["casing"] = "dotted-i"  # Turkish/Azerbaijani capitals, cased by their own rule
    if held_out:
        content["held_out"] = held_out
    if tokenizer:
        content["tokenizer"] = tokenizer
    if excluded:
        content["excluded"] = excluded
    blob = json.dumps(content, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def filtering(cfg: DataConfig) -> bool:
    """Whether any filter runs on the corpus' pairs (``data.filters``, a source's own)."""
    specs = [s.filters or cfg.filters for s in cfg.sources] if cfg.sources else [cfg.filters]
    return any(parse_filters(spec) for spec in specs)


@contextlib.contextmanager
def building(cache_dir: Path, replace: bool = True) -> Iterator[Path]:
    """A temporary directory beside ``cache_dir`` to write a cache into, renamed into place when
    the block ends: the cache is complete or absent. A failure (disk full) is one line and leaves
    no partial cache; directories follow the umask like files. ``work/`` in it is for files that
    are not part of the cache (removed before the rename). ``replace=False`` (a fresh build):
    a cache another process put in place meanwhile is kept (same key, same arrays), so a
    process reading it is not left without its files."""
    made = not cache_dir.parent.exists()  # removed again if nothing is put in it
    make_dirs(cache_dir.parent)
    with write_errors(str(cache_dir)):
        held = _temporary(cache_dir, "")
        try:
            tmp = held.path
            (tmp / WORK).mkdir()
            yield tmp
            shutil.rmtree(tmp / WORK)
            _install(tmp, cache_dir, replace)
        finally:
            held.cleanup()
            if made:
                with contextlib.suppress(OSError):  # not empty: another cache is in it
                    cache_dir.parent.rmdir()


WORK = "work"
# what a cache's temporary folders are called in cache/: ".KEY-XXXX" (16 hex digits of key)
TEMPORARY_KIND = "." + "[0-9a-f]" * 16 + "-*"


def _temporary(cache_dir: Path, what: str) -> Temporary:
    """A held temporary folder beside ``cache_dir`` (``.KEY-XXXX``, ``.KEY-old-XXXX``); the
    ones killed preparations of any key left are removed first (:class:`nmt.files.Temporary`)."""
    return Temporary(cache_dir.parent, f".{cache_dir.name}-{what}", kind=TEMPORARY_KIND)


def _install(tmp: Path, cache_dir: Path, replace: bool) -> None:
    if cache_dir.exists() and not replace:  # another process built it first: keep theirs
        return
    if not cache_dir.exists():
        _put(tmp, cache_dir)
        return
    # a rebuild: the old cache moved into a held folder, removed once the new one is in place
    with _temporary(cache_dir, "old-") as old:  # (another rebuild may have moved it first)
        swap_in(tmp, cache_dir, old / "cache", put=_put)


def _put(tmp: Path, cache_dir: Path) -> None:
    try:
        os.replace(tmp, cache_dir)
    except OSError as e:
        # another process put its cache of the same key in place between the check above and
        # here: the same arrays (the key says so), complete (renamed into place whole)
        if e.errno not in (errno.ENOTEMPTY, errno.EEXIST) or not (
                cache_dir / "meta.json").is_file():
            raise


class RejectedWriter:
    """rejected.tsv, a pair at a time: the filter that removed it, its source and target (tabs
    and line ends inside a side written as spaces)."""

    def __init__(self, directory: Path) -> None:
        self._f = (directory / REJECTED_FILE).open("w", encoding="utf-8", newline="")
        self._f.write("filter\tsource\ttarget\n")

    def add(self, name: str, src: str, tgt: str) -> None:
        self._f.write("\t".join(" ".join(x.split()) for x in (name, src, tgt)) + "\n")

    def close(self) -> None:
        self._f.close()


class NpyWriter:
    """A 1-D ``.npy`` file written a chunk at a time. Its header, which holds the length, is
    written last over one of the same size (numpy leaves room in it for any length)."""

    def __init__(self, path: Path, dtype: type) -> None:
        self._f = path.open("wb")
        self._dtype = np.dtype(dtype)
        self.n = 0
        self._header()
        self._start = self._f.tell()

    def _header(self) -> None:
        np.lib.format.write_array_header_1_0(self._f, {
            "descr": np.lib.format.dtype_to_descr(self._dtype), "fortran_order": False,
            "shape": (self.n,)})

    def append(self, values: np.ndarray) -> None:
        self._f.write(np.ascontiguousarray(values, self._dtype).tobytes())
        self.n += len(values)

    def close(self) -> None:
        self._f.seek(0)
        self._header()
        if self._f.tell() != self._start:  # numpy's room for the length ran out: not expected
            raise DataError(f"{self._f.name}: the .npy header grew; cannot write it in place")
        self._f.close()


ENCODE_CHUNK = 8192  # pairs encoded at a time


class SplitWriter:
    """One split of the cache, written as its pairs come: the text files a line at a time, the
    ids of :data:`ENCODE_CHUNK` pairs at a time (``tokenizer``'s batch encoding), appended to
    the split's ``.npy`` arrays. ``distinct()``: how many different sources it holds (their
    hashes wait in ``directory/work``, counted a bucket at a time)."""

    def __init__(self, directory: Path, name: str, tokenizer: Tokenizer) -> None:
        self.name = name
        self._tok = tokenizer
        # newline="": a reference as written may hold a lone \r; it stays in its line
        self._text = {side: (directory / f"{name}.{side}.txt").open("w", encoding="utf-8",
                                                                     newline="")
                      for side in TEXT_SIDES}
        self._arrays = {a: NpyWriter(directory / f"{name}.{a}.npy",
                                     np.int32 if a.endswith("ids") else np.int64)
                        for a in ARRAYS}
        for a in ("src_offsets", "tgt_offsets"):
            self._arrays[a].append(np.zeros(1, np.int64))
        self._pending: list[tuple[str, str, str]] = []
        (directory / WORK).mkdir(exist_ok=True)
        self._sources = Column(directory / WORK / f"{name}.sources")
        self._distinct: int | None = None
        self.pairs = 0

    def add(self, src: str, tgt: str, ref: str) -> None:
        self._pending.append((src, tgt, ref))
        if len(self._pending) >= ENCODE_CHUNK:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        src, tgt, ref = (list(side) for side in zip(*self._pending, strict=True))
        for side, lines in zip(TEXT_SIDES, (src, tgt, ref), strict=True):
            self._text[side].write("".join(t + "\n" for t in lines))
        for side, seqs in (("src", self._tok.encode_src_batch(src)),
                           ("tgt", self._tok.encode_tgt_batch(tgt))):
            ids = self._arrays[f"{side}_ids"]
            lengths = np.fromiter(map(len, seqs), np.int64, len(seqs))
            self._arrays[f"{side}_offsets"].append(ids.n + np.cumsum(lengths))  # ids so far
            ids.append(np.fromiter(itertools.chain.from_iterable(seqs), np.int32,
                                   int(lengths.sum())))
        for s in src:
            self._sources.append(text_hash(s))
        self.pairs += len(src)
        self._pending = []

    def distinct(self) -> int:
        """How many different sources the split holds (counted when it is closed)."""
        if self._distinct is None:
            raise ValueError(f"{self.name}: distinct() before close()")
        return self._distinct

    def _count_distinct(self) -> int:
        with HashBuckets(self._sources.path.with_suffix(".buckets"),
                         len(self._sources)) as buckets:
            buckets.add_column(self._sources)
            return sum(len(np.unique(hashes)) for hashes, _ in buckets.buckets())

    def close(self) -> None:
        self._flush()
        for f in self._text.values():
            f.close()
        for w in self._arrays.values():
            w.close()
        self._distinct = self._count_distinct()
        self._sources.close()


TEXT_SIDES = ("src", "tgt", "ref")


class TextFile(Sequence[str]):
    """A split's text file (``{split}.{side}.txt``), read a line at a time when iterated (lines
    end at ``\\n`` only); indexing reads it whole, once."""

    def __init__(self, path: Path, count: int) -> None:
        self.path, self._count = path, count
        self._lines: list[str] | None = None

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[str]:
        if self._lines is not None:
            yield from self._lines
            return
        n = 0
        try:
            opened = open_stored(self.path, self.path.parent)
        except DataError as e:  # the cache removed or replaced since it was loaded
            raise DataError(f"{self.path}: cannot read ({str(e).removeprefix(f'{self.path}: ')}"
                            "; nmt data prepare --rebuild)") from None
        try:
            with opened as f:
                for n, line in enumerate(f, 1):
                    if n > self._count or not line.endswith(b"\n"):
                        break
                    yield line[:-1].decode("utf-8")
                else:
                    if n == self._count:
                        return
        except (OSError, UnicodeDecodeError) as e:  # the cache removed or damaged since loaded
            reason = os_reason(e) if isinstance(e, OSError) else "not UTF-8"
            raise DataError(f"{self.path}: cannot read ({reason}; nmt data prepare "
                            "--rebuild)") from None
        raise DataError(f"{self.path}: expected {self._count:,} lines (damaged cache; "
                        "nmt data prepare --rebuild)")

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        if self._lines is None:
            self._lines = list(self)
        return self._lines[i]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]


def load_cache(cache_dir: Path) -> Prepared:
    """Read a cache written by :func:`nmt.data.prepare.build_cache`, checking everything it
    reads (the types of meta.json, the arrays' headers, dtypes and shapes, every id against the
    vocabulary, a chunk at a time): a damaged or foreign cache is a :class:`DataError` (which
    :func:`prepare` answers with a rebuild), never a crash here or an out-of-range id in
    training. The arrays are memory-mapped; the text is read when it is iterated.

    First every file's SHA-256 is checked against the one meta.json records (``files``), so
    damage that keeps a file's shape (a flipped byte in a text or ``spm.model``, an id changed
    to another in range) is found too; every file is opened through
    :func:`nmt.files.open_stored` (a FIFO, a device, a directory or a link out of the cache is
    refused, never read)."""
    meta_path = cache_dir / "meta.json"
    if not os.path.lexists(meta_path):
        raise DataError(f"{meta_path}: missing (incomplete cache)")
    meta = _read_meta(meta_path)
    if meta_digest(meta) != meta["digest"]:
        raise DataError(f"{meta_path}: damaged (its content does not match its digest)")
    for name, digest in meta["files"].items():
        found = stored_digest(cache_dir / name, cache_dir)
        if found != digest:
            raise DataError(f"{cache_dir / name}: damaged (SHA-256 {found[:12]}..., meta.json "
                            f"records {digest[:12]}...)")
    tok = load_tokenizer(cache_dir)
    splits = {}
    for k in SPLITS:
        pairs = meta["pairs"][k]
        arrays = {a: _read_array(cache_dir / f"{k}.{a}.npy") for a in ARRAYS}
        texts = {f"{side}_text": TextFile(cache_dir / f"{k}.{side}.txt", pairs)
                 for side in TEXT_SIDES}
        for text in texts.values():
            open_stored(text.path, cache_dir).close()  # read when iterated: checked now
        sp = Split(k, arrays["src_ids"], arrays["src_offsets"], arrays["tgt_ids"],
                   arrays["tgt_offsets"], texts["src_text"], texts["tgt_text"], texts["ref_text"])
        _check_split(cache_dir, sp, pairs, tok)
        splits[k] = sp
    return Prepared(tok, splits, cache_dir, meta["corpus_sha256"], meta)


ARRAYS = ("src_ids", "src_offsets", "tgt_ids", "tgt_offsets")


def _read_array(path: Path) -> np.ndarray:
    """One array of a split, memory-mapped, its header checked against the bytes the file holds
    first (a header declaring more than the file holds would map past its end; one declaring
    less would leave bytes unexplained). A damaged file is a :class:`DataError` naming it."""
    try:
        with open_stored(path, path.parent) as f:
            version = np.lib.format.read_magic(f)
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, fortran, dtype = read_header(f)
            start = f.tell()
            size = os.fstat(f.fileno()).st_size
            declared = int(np.prod(shape, dtype=object)) * dtype.itemsize
            if declared != size - start:
                raise DataError(f"{path}: declares {declared:,} bytes of {dtype} "
                                f"{tuple(shape)}, the file holds {size - start:,}")
            if dtype.hasobject:
                raise DataError(f"{path}: holds Python objects, not numbers")
            # mapped from the file checked above, not opened again by name
            return np.memmap(f, dtype=dtype, mode="r", offset=start, shape=shape,
                             order="F" if fortran else "C")
    except (OSError, ValueError, EOFError, MemoryError) as e:
        raise DataError(f"{path}: unreadable ({first_line(e, 160)})") from None


def _read_meta(path: Path) -> dict[str, Any]:
    """meta.json, checked field by field against what :func:`build_cache` writes."""
    try:
        meta = json.loads(read_stored_text(path, path.parent))
    except RecursionError:
        raise DataError(f"{path}: nested too deeply") from None
    except ValueError as e:
        raise DataError(f"{path}: not JSON ({first_line(e, 80)})") from None

    def count(x: Any) -> bool:
        return isinstance(x, int) and not isinstance(x, bool) and x >= 0

    if not isinstance(meta, dict):
        raise DataError(f"{path}: expected a JSON object, got {type(meta).__name__}")
    if type(meta.get("version")) is not int or meta["version"] != CACHE_VERSION:
        raise DataError(f"{path}: cache version {shown(meta.get('version'), 20)}, "
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
        "digest": not isinstance(meta.get("digest"), str),
        "files": not (isinstance(meta.get("files"), dict) and all(
            isinstance(v, str) and _FILE_NAME.fullmatch(k) for k, v in meta["files"].items())),
    }
    bad = [key for key, wrong in problems.items() if wrong]
    if bad:
        raise DataError(f"{path}: {bad[0]}: not what a cache holds")
    return meta


_FILE_NAME = re.compile(r"[\w][\w.-]*")  # a file of the cache itself, never a path out of it


def meta_digest(meta: dict[str, Any]) -> str:
    """SHA-256 of what meta.json says, its own ``digest`` aside (how its keys and values are
    spaced aside too): meta.json records it, so that it is checked like the files it lists."""
    rest = {k: v for k, v in meta.items() if k != "digest"}
    return hashlib.sha256(json.dumps(rest, sort_keys=True).encode()).hexdigest()


def file_digests(directory: Path) -> dict[str, str]:
    """The SHA-256 of every file in ``directory`` (a cache being built), by name: what
    meta.json records and :func:`load_cache` checks."""
    return {p.name: stored_digest(p, directory) for p in sorted(directory.iterdir())
            if p.is_file() and p.name != "meta.json"}


CHECK_CHUNK = 1 << 22  # ids checked at a time: the check holds no corpus-sized temporary


def _part(array: np.ndarray, start: int, stop: int) -> np.ndarray:
    """``array[start:stop]`` as a copy; read from the file when ``array`` maps one, so that
    checking a cache leaves none of its pages mapped in: a process that loads a large cache
    does not hold it all resident (the pages stay in the system's file cache, which it reclaims
    at will; those of the mapping counted in the process' resident memory)."""
    stop = min(stop, len(array))
    if isinstance(array, np.memmap) and isinstance(array.base, mmap.mmap) and array.ndim == 1:
        return np.fromfile(array.filename, dtype=array.dtype, count=max(stop - start, 0),
                           offset=array.offset + start * array.dtype.itemsize)
    return np.array(array[start:stop])


def _check_split(cache_dir: Path, sp: Split, pairs: int, tok: Tokenizer) -> None:
    """The arrays of one split fit each other, ``pairs`` and the vocabulary."""
    for side, ids, offsets, vocab in (("src", sp.src_ids, sp.src_offsets, tok.src_vocab_size),
                                      ("tgt", sp.tgt_ids, sp.tgt_offsets, tok.tgt_vocab_size)):
        path = cache_dir / f"{sp.name}.{side}_ids.npy"
        if not (ids.dtype == np.int32 and ids.ndim == 1 and offsets.dtype == np.int64
                and offsets.shape == (pairs + 1,)):
            raise DataError(f"{path}: {side} arrays: expected int32 ids and {pairs + 1:,} int64 "
                            f"offsets, got {ids.dtype} {ids.shape} and {offsets.dtype} "
                            f"{offsets.shape}")
        if not (offsets[0] == 0 and offsets[-1] == len(ids) and all(
                (np.diff(_part(offsets, i, i + CHECK_CHUNK + 1)) >= 0).all()
                for i in range(0, pairs, CHECK_CHUNK))):
            raise DataError(f"{path}: {side}_offsets: not a split of the {len(ids):,} ids")
        for i in range(0, len(ids), CHECK_CHUNK):
            chunk = _part(ids, i, i + CHECK_CHUNK)
            if not (0 <= chunk.min() and chunk.max() < vocab):
                raise DataError(f"{path}: {side}_ids: ids from {chunk.min()} to {chunk.max()}, "
                                f"expected 0 to {vocab - 1} (the vocabulary)")
            if ((chunk > UNK_ID) & (chunk < len(SPECIALS))).any():  # <pad>, <bos>, <eos>
                raise DataError(f"{path}: {side}_ids: holds <pad>, <bos> or <eos>, which no "
                                "text encodes to")
