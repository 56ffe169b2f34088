"""Corpus -> normalised, cleaned, split, tokenized and cached arrays.

``prepare(cfg, data_dir)`` opens the data the config declares (:mod:`nmt.data.corpora`: the
built-in corpus, downloaded when missing, or the user's files), then loads the cache for this
data and config or builds it. The cache lives in ``data_dir/cache/<key>/`` where ``key`` hashes
the corpus SHA-256 (and the held-out files', when given) and every :class:`DataConfig` field
that changes the arrays, so a changed config or an edited file builds a new cache and an
unchanged one loads in well under a second. Layout (docs/DATA.md)::

    meta.json                     config, corpus digest and identity, counts, build time
    tokenizer.json, *.model|*.txt  the tokenizer, trained on the train split only
    {split}.npz                   src_ids, tgt_ids (int32, flat), src_offsets, tgt_offsets (int64)
    {split}.src.txt, .tgt.txt     normalised text, one pair per line
    {split}.ref.txt               the references BLEU is computed against, one per pair: the
                                  target as the corpus writes it (natural text), or the
                                  normalised target (the textbook's lower-cased, spaced text)

With ``data.case_augment`` the train split ends with the augmented pairs: a share of its pairs
again, the source in the textbook's form (:func:`nmt.data.normalize.textbook_form`).

A cache is built in a temporary directory and renamed into place, so it is complete or absent.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
import re
import shutil
import tempfile
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nmt.config import CASE_FORM_NAMES, DataConfig
from nmt.data.corpora import Corpus, Data, open_data
from nmt.data.languages import Language, language
from nmt.data.normalize import normalize, textbook_form
from nmt.data.split import grouped_split
from nmt.data.tokenizers import (
    SPECIALS,
    UNK_ID,
    SentencePieceTokenizer,
    Tokenizer,
    WordTokenizer,
    load_tokenizer,
)
from nmt.errors import DataError, write_errors
from nmt.files import make_dirs, umask_mode

CACHE_VERSION = 2  # bump when the cache layout or the preparation changes meaning
SPLITS = ("train", "valid", "test")
# DataConfig fields that do not change the cached arrays (truncation happens when batching)
_NOT_IN_KEY = {"truncate"}
_TOKENIZER_ONLY = {"sentencepiece": {"min_freq"},
                   "word": {"sp_model_type", "vocab_size", "character_coverage"}}
# Where the data is: the key holds the digests of the content instead, so a moved file keeps
# its cache and an edited one builds a new cache
_PATHS = {"corpus", "valid", "test"}
# Fields added after CACHE_VERSION 2: left out of the key at their defaults, so that the caches
# of the configs that existed before them keep their keys
_ADDED = ("source", "target", "columns", "character_coverage", "case_forms")


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


def cache_key(cfg: DataConfig, digest: str, held_out: dict[str, str] | None = None) -> str:
    """16 hex digits naming the cache of ``cfg`` on the corpus with SHA-256 ``digest`` (and the
    ``valid`` / ``test`` files with the digests ``held_out``, when given)."""
    skip = _NOT_IN_KEY | _PATHS | _TOKENIZER_ONLY.get(cfg.tokenizer, set())
    skip |= {k for k in _ADDED if getattr(cfg, k) == getattr(_DEFAULTS, k)}
    fields = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in skip}
    content: dict[str, Any] = {"v": CACHE_VERSION, "corpus": digest, "data": fields}
    if held_out:
        content["held_out"] = held_out
    blob = json.dumps(content, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


_DEFAULTS = DataConfig()


def prepare(
    cfg: DataConfig,
    data_dir: Path,
    *,
    source: str | None = None,
    log: Callable[[str], None] = print,
    rebuild: bool = False,
) -> Prepared:
    """Open the declared data (downloading the corpus when missing), then load the cache or
    build it."""
    data_dir = Path(data_dir)
    data = open_data(cfg, data_dir, source=source, log=log)
    digest = data.corpus.identity.sha256
    cache_dir = data_dir / "cache" / cache_key(cfg, digest, data.held_out_digests())
    if cache_dir.is_dir() and not rebuild:
        try:
            prepared = load_cache(cache_dir)
            log(f"loaded cache {cache_dir}")
            prepared.identity = data.identity()
            return prepared
        except (DataError, OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
            log(f"cache {cache_dir} unreadable ({e}); rebuilding")
    return build_cache(cfg, data, cache_dir, log=log)


# --- reading and cleaning --------------------------------------------------------------------


def reference_text(raw: str, normalized: str, cfg: DataConfig) -> str:
    """What a translation is scored against: natural text is scored against the target as the
    corpus writes it (sacrebleu's own tokenizer does the rest, as published scores are
    computed); the textbook's lower-cased, spaced text against the target normalised the same
    way, so a model trained on it is not scored on case."""
    return raw.strip() if cfg.natural_text else normalized


def length_in_words(text: str, lang: Language) -> int:
    """Words for ``max_words``: separated by spaces, or, in a script written without them
    (Chinese, Japanese, Thai), characters other than spaces."""
    return len(text.split()) if lang.spaced else len(text) - text.count(" ")


def read_pairs(
    corpus: Corpus, cfg: DataConfig, *, held_out: bool = False
) -> tuple[list[str], list[str], dict[str, int], list[str]]:
    """Normalised, cleaned (source, target) pairs of the first ``cfg.max_pairs`` pairs, the
    counts of what was read and dropped, and each pair's reference (:func:`reference_text`).

    ``held_out``: a ``data.valid`` / ``data.test`` file, used as it is: all its pairs, only
    those empty after cleaning dropped (not the long ones, not the duplicates)."""
    pairs = corpus.pairs()
    if cfg.max_pairs and not held_out:
        pairs = itertools.islice(pairs, cfg.max_pairs)
    src_lang, tgt_lang = language(cfg.source), language(cfg.target)
    counts = dict(read=0, empty=0, too_long=0, duplicates=0, kept=0)
    src: list[str] = []
    tgt: list[str] = []
    ref: list[str] = []
    seen: set[tuple[str, str]] = set()
    for raw_src, raw_tgt in pairs:
        counts["read"] += 1
        s = normalize(raw_src, cfg.lowercase, cfg.normalization, lang=cfg.source)
        t = normalize(raw_tgt, cfg.lowercase, cfg.normalization, lang=cfg.target)
        if not s.strip() or not t.strip():
            counts["empty"] += 1
            continue
        if not held_out:
            if cfg.max_words and max(length_in_words(s, src_lang),
                                     length_in_words(t, tgt_lang)) > cfg.max_words:
                counts["too_long"] += 1  # more than max_words words on a side
                continue
            if cfg.dedup:
                if (s, t) in seen:
                    counts["duplicates"] += 1
                    continue
                seen.add((s, t))
        src.append(s)
        tgt.append(t)
        ref.append(reference_text(raw_tgt, t, cfg))
    counts["kept"] = len(src)
    if not src:
        ident = corpus.identity
        files = ", ".join(ident.files) or ident.corpus
        raise DataError(f"{files}: no usable {cfg.source}-{cfg.target} pairs in "
                        f"{counts['read']:,} read ({counts['empty']:,} empty after cleaning, "
                        f"{counts['too_long']:,} over data.max_words = {cfg.max_words})")
    return src, tgt, counts, ref


def title_case(text: str) -> str:
    """Each space-separated word with a capital first letter (``"I'm Home."``; ``str.title``
    would write ``"I'M Home."``)."""
    return " ".join(w[:1].upper() + w[1:] for w in text.split(" "))


# The forms case augmentation can write a source in (data.case_forms names them, in turn)
CASE_FORMS: dict[str, Callable[[str], str]] = dict(
    zip(CASE_FORM_NAMES, (textbook_form, str.upper, title_case), strict=True))


def case_augmented(
    src: list[str], tgt: list[str], ref: list[str], share: float, seed: int,
    forms: Sequence[str] = ("textbook",),
) -> tuple[list[str], list[str], list[str]]:
    """Pairs to add to the train split: a random ``share`` of them (seeded), the source in each
    of ``forms`` (names of :data:`CASE_FORMS`) in turn, the target as it is. A source already in
    its form is not repeated."""
    if share <= 0 or not src:
        return [], [], []
    rng = np.random.default_rng(seed)
    picked = np.sort(rng.choice(len(src), size=round(share * len(src)), replace=False))
    out: tuple[list[str], list[str], list[str]] = ([], [], [])
    for k, i in enumerate(picked.tolist()):
        noisy = CASE_FORMS[forms[k % len(forms)]](src[i])
        if noisy != src[i]:
            out[0].append(noisy)
            out[1].append(tgt[i])
            out[2].append(ref[i])
    return out


def encode_split(
    name: str, tok: Tokenizer, src: list[str], tgt: list[str], ref: list[str] | None = None
) -> Split:
    def flat(seqs: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
        offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        ids = np.fromiter(itertools.chain.from_iterable(seqs), dtype=np.int32,
                          count=int(offsets[-1]))
        return ids, offsets

    src_ids, src_offsets = flat(tok.encode_src_batch(src))
    tgt_ids, tgt_offsets = flat(tok.encode_tgt_batch(tgt))
    return Split(name, src_ids, src_offsets, tgt_ids, tgt_offsets, src, tgt,
                 list(tgt) if ref is None else ref)


def train_tokenizer(cfg: DataConfig, src: list[str], tgt: list[str]) -> Tokenizer:
    if cfg.tokenizer == "word":
        return WordTokenizer.train(src, tgt, min_freq=cfg.min_freq, joint=cfg.joint_vocab)
    return SentencePieceTokenizer.train(
        src, tgt, vocab_size=cfg.vocab_size, model_type=cfg.sp_model_type,
        joint=cfg.joint_vocab, seed=cfg.split_seed, character_coverage=cfg.character_coverage)


# --- the cache -------------------------------------------------------------------------------


def build_cache(
    cfg: DataConfig, data: Data, cache_dir: Path, *, log: Callable[[str], None] = print,
) -> Prepared:
    t0 = time.perf_counter()
    src, tgt, counts, ref = read_pairs(data.corpus, cfg)
    log(f"read {counts['read']:,} pairs; kept {counts['kept']:,} pairs; dropped "
        f"{counts['duplicates']:,} duplicates, {counts['empty']:,} empty, "
        f"{counts['too_long']:,} over {cfg.max_words} words")
    given = {name: read_pairs(c, cfg, held_out=True) for name, c in
             (("valid", data.valid), ("test", data.test)) if c is not None}
    index = grouped_split(src, 0.0 if "valid" in given else cfg.valid_frac,
                          0.0 if "test" in given else cfg.test_frac, cfg.split_seed)
    texts = {k: ([src[i] for i in idx], [tgt[i] for i in idx], [ref[i] for i in idx])
             for k, idx in index.items()}
    train_sources = set(texts["train"][0])
    for name, (s, t, _, r) in given.items():
        texts[name] = (s, t, r)
        overlap = len(set(s) & train_sources)
        if overlap:
            log(f"warning: {overlap:,} of the {len(set(s)):,} source sentences of data.{name} "
                f"({getattr(cfg, name)}) are also in the training data (data.corpus)")
    tok = train_tokenizer(cfg, *texts["train"][:2])  # on the text as written, not the copies
    extra = case_augmented(*texts["train"], cfg.case_augment, cfg.split_seed,
                           cfg.case_forms.split(","))
    if cfg.case_augment and not language(cfg.source).has_case:
        log(f"case augmentation: none, {language(cfg.source).name} is written without letter "
            "case")
        extra = ([], [], [])
    if extra[0]:
        src_t, tgt_t, ref_t = texts["train"]
        texts["train"] = (src_t + extra[0], tgt_t + extra[1], ref_t + extra[2])
        log(f"case augmentation: {len(extra[0]):,} training pairs added with the source "
            f"written {', '.join(dict.fromkeys(cfg.case_forms.split(',')))}")
    counts["case_augmented"] = len(extra[0])
    splits = {k: encode_split(k, tok, *texts[k]) for k in SPLITS}
    for k, sp in splits.items():
        log(f"{k}: {len(sp):,} pairs, {len(set(sp.src_text)):,} distinct sources")
    vocab = (f"joint vocabulary {tok.src_vocab_size:,}" if tok.joint else
             f"vocabularies src {tok.src_vocab_size:,}, tgt {tok.tgt_vocab_size:,}")
    log(f"tokenizer: {tok.kind}, {vocab}")
    digest = data.corpus.identity.sha256
    meta = {"version": CACHE_VERSION, "corpus_sha256": digest, "data": dataclasses.asdict(cfg),
            "corpus": data.identity(), "counts": counts,
            "pairs": {k: len(v) for k, v in splits.items()},
            "seconds": round(time.perf_counter() - t0, 2)}
    _write_atomically(cache_dir, tok, splits, meta)
    log(f"prepared in {meta['seconds']:.1f} s: {cache_dir}")
    return Prepared(tok, splits, cache_dir, digest, meta, data.identity())


def _write_atomically(cache_dir: Path, tok: Tokenizer, splits: dict[str, Split],
                      meta: dict[str, Any]) -> None:
    """Write the cache into a temporary directory, then rename it into place. A failure (disk
    full) is one line and leaves no partial cache; directories follow the umask like files."""
    make_dirs(cache_dir.parent)
    with write_errors(str(cache_dir)):
        _write_cache(cache_dir, tok, splits, meta)


def _write_cache(cache_dir: Path, tok: Tokenizer, splits: dict[str, Split],
                 meta: dict[str, Any]) -> None:
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
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        if cache_dir.exists():  # a rebuild, or another process won the race: replace it
            old = cache_dir.with_name(f".{cache_dir.name}-old-{os.getpid()}")
            os.replace(cache_dir, old)
            shutil.rmtree(old, ignore_errors=True)
        os.replace(tmp, cache_dir)
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
        try:
            with np.load(cache_dir / f"{k}.npz", allow_pickle=False) as z:
                arrays = {name: z[name] for name in
                          ("src_ids", "src_offsets", "tgt_ids", "tgt_offsets")}
        except MemoryError:  # a damaged header: numpy allocates the shape it declares first
            raise DataError(f"{cache_dir}/{k}.npz: declares arrays larger than memory") from None
        src, tgt, ref = (_read_lines(cache_dir / f"{k}.{side}.txt")
                         for side in ("src", "tgt", "ref"))
        sp = Split(k, src_text=src, tgt_text=tgt, ref_text=ref, **arrays)
        _check_split(cache_dir / f"{k}.npz", sp, meta["pairs"][k], tok)
        splits[k] = sp
    return Prepared(tok, splits, cache_dir, meta["corpus_sha256"], meta)


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
