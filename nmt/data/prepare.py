"""Corpus -> normalised, cleaned, split, tokenized and cached arrays.

``prepare(cfg, data_dir)`` opens the data the config declares (:mod:`nmt.data.corpora`: the
built-in corpus, downloaded when missing, or the user's files), then loads the cache for this
data and config or builds it. The cache lives in ``data_dir/cache/<key>/`` where ``key`` hashes
the corpus SHA-256 (and the held-out files', when given) and every :class:`DataConfig` field
that changes the arrays, so a changed config or an edited file builds a new cache and an
unchanged one loads in well under a second. Layout (docs/DATA.md)::

    meta.json                     config, corpus digest and identity, counts, build time
    tokenizer.json, *.model|*.txt  the tokenizer, trained on the train split only
    {split}.{array}.npy           src_ids, tgt_ids (int32, flat), src_offsets, tgt_offsets
                                  (int64); memory-mapped when read
    {split}.src.txt, .tgt.txt     normalised text, one pair per line
    {split}.ref.txt               the references BLEU is computed against, one per pair: the
                                  target as the corpus writes it (natural text), or the
                                  normalised target (the textbook's lower-cased, spaced text)

With ``data.case_augment`` the train split ends with the augmented pairs: a share of its pairs
again, the source in another case (:mod:`nmt.data.augment`).

A cache is built in a temporary directory and renamed into place, so it is complete or absent
(:mod:`nmt.data.cache`: the arrays, the key, the writing and the checked reading).
:func:`build_cache` builds it in named stages, each a function with a named result, read top to
bottom: read and clean (:func:`read_and_clean` -> :class:`Read`), split (:func:`split_pairs` ->
:class:`Split`), weight and augment (:func:`weight_and_augment` -> :class:`Mix`), tokenize
(:func:`tokenize` -> the tokenizer), encode and write (:func:`encode_and_write` ->
:class:`Written`, then :func:`write_meta`). It goes a pair at a time: the cleaned pairs and their
hashes wait in a spool on disk (:mod:`nmt.data.spool`), duplicates and the split's groups are
found a bucket of hashes at a time (:mod:`nmt.data.hash_buckets`), and each split is encoded and
written as it is read back, so memory grows by two bytes a pair, not by the corpus' text.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import shutil
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nmt.config import DataConfig
from nmt.data.augment import add_case_forms, add_span_forms, case_picks
from nmt.data.cache import (
    CACHE_VERSION,
    SPLITS,
    WORK,
    Prepared,
    RejectedWriter,
    SplitWriter,
    building,
    cache_key,
    file_digests,
    load_cache,
    meta_digest,
)
from nmt.data.cleaning import Cleaned, read_pairs, read_sources
from nmt.data.corpora import Data, open_data
from nmt.data.hash_buckets import HashBuckets
from nmt.data.languages import language
from nmt.data.spans import rules as span_rules
from nmt.data.split import (
    HeldOutSources,
    hold_back_translated_out,
    hold_out_of_training,
    split_spool,
)
from nmt.data.spool import PairSpool
from nmt.data.tokenizers import (
    BT_TAG,
    LineFiles,
    SentencePieceTokenizer,
    Sentences,
    Tokenizer,
    WordTokenizer,
)
from nmt.errors import ConfigError, DataError


def prepare(
    cfg: DataConfig,
    data_dir: Path,
    *,
    source: str | None = None,
    log: Callable[[str], None] = print,
    rebuild: bool = False,
    tokenizer: Tokenizer | None = None,
    excluded: HeldOutSources | None = None,
) -> Prepared:
    """Open the declared data (downloading the corpus when missing), then load the cache or
    build it. ``tokenizer``: encode with it instead of training one (a model continued on new
    data keeps its parent's; its digest is part of the cache's key). ``excluded``: sources the
    training split leaves out (a continued model's parent's valid and test sources; their
    digest is part of the key too)."""
    data_dir = Path(data_dir)
    data = open_data(cfg, data_dir, source=source, log=log)
    cache_dir = cache_path(cfg, data, data_dir, tokenizer, excluded)
    existed = cache_dir.is_dir()  # else a fresh build, which keeps one put in place meanwhile
    if existed and not rebuild and (prepared := load_prepared(cache_dir, data, log)):
        return prepared
    return build_cache(cfg, data, cache_dir, log=log, tokenizer=tokenizer, excluded=excluded,
                       replace=existed)


def prepare_trained(
    cfg: DataConfig, data_dir: Path, tokenizer: Tokenizer, excluded: HeldOutSources | None,
    *, log: Callable[[str], None] = print,
) -> Prepared:
    """The data of a trained run, to score it: the cache its training built (keyed by the
    sources it left out of training when it left any, else the one its tokenizer was trained
    in, or one built with it), or, where that is gone, the cache built anew with the run's
    ``tokenizer``, said in one line. Never a tokenizer trained: the held-out splits are the same
    whichever tokenizer and training split the cache holds (the split depends on neither)."""
    data_dir = Path(data_dir)
    data = open_data(cfg, data_dir, log=log)
    given = cache_path(cfg, data, data_dir, tokenizer, excluded)
    candidates = [given] if excluded is not None else [
        cache_path(cfg, data, data_dir, None, None), given]
    for cache_dir in candidates:
        if cache_dir.is_dir() and (prepared := load_prepared(cache_dir, data, log)):
            return prepared
    log(f"no cache of this run's data in {data_dir / 'cache'}; building it with the run's "
        f"tokenizer ({tokenizer.kind}, digest {tokenizer.digest()[:12]}...)")
    return build_cache(cfg, data, given, log=log, tokenizer=tokenizer, excluded=excluded,
                       replace=given.is_dir())


def cache_path(cfg: DataConfig, data: Data, data_dir: Path, tokenizer: Tokenizer | None,
               excluded: HeldOutSources | None) -> Path:
    """Where the cache of ``data`` prepared as ``cfg`` says lives (:func:`cache_key`)."""
    return data_dir / "cache" / cache_key(
        cfg, data.corpus.identity.sha256, data.held_out_digests(),
        None if tokenizer is None else tokenizer.digest(),
        None if excluded is None else excluded.digest())


def load_prepared(cache_dir: Path, data: Data, log: Callable[[str], None]) -> Prepared | None:
    """The cache in ``cache_dir``, loaded; None, said, where it cannot be read (to rebuild)."""
    try:
        prepared = load_cache(cache_dir)
    except (DataError, OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
        log(f"cache {cache_dir} unreadable ({e}); rebuilding")
        return None
    log(f"loaded cache {cache_dir}")
    prepared.identity = record(data, prepared.meta)
    return prepared


# --- building the cache, stage by stage ------------------------------------------------------


def build_cache(
    cfg: DataConfig, data: Data, cache_dir: Path, *, log: Callable[[str], None] = print,
    tokenizer: Tokenizer | None = None, excluded: HeldOutSources | None = None,
    replace: bool = True,
) -> Prepared:
    """Read, clean, split, weight, tokenize and write the cache of ``data``, a stage at a time
    (the functions below, in this order), a pair at a time: the cleaned pairs and their hashes
    wait on disk (:class:`nmt.data.spool.PairSpool`), each pair's duplicate flag and split are
    a byte each in memory, and each split is written as it is read back (:class:`SplitWriter`),
    so memory grows by two bytes a pair (and five a distinct source while the split is drawn),
    not by the pairs' text or hashes."""
    t0 = time.perf_counter()
    with building(cache_dir, replace) as tmp:
        spool = PairSpool(tmp / WORK / "pairs.txt")
        read = read_and_clean(cfg, data, spool, tmp, log)
        split = split_pairs(cfg, data, spool, read, excluded, log)
        mix = weight_and_augment(cfg, data, spool, read, log)
        tok = tokenize(cfg, tokenizer, spool, read, tmp / WORK, log)
        written = encode_and_write(cfg, spool, read, split, mix, tok, tmp, cache_dir, log)
        for spooled in (spool, *split.given.values()):
            spooled.close()
        meta = write_meta(cfg, data, read, split, mix, written, excluded, tmp,
                          time.perf_counter() - t0)
    log(f"prepared in {meta['seconds']:.1f} s: {cache_dir}")
    prepared = load_cache(cache_dir)
    prepared.identity = record(data, meta)
    return prepared


@dataclass
class Read:
    """What reading and cleaning left in the spool: the counts of all sources as one
    (``cleaned``), each source's own (``parts``: its pairs are the spool's from its ``first`` to
    its ``end``) and the spool's ranges of the back-translated sources (``synthetic``)."""

    cleaned: Cleaned
    parts: list[Cleaned]
    synthetic: list[tuple[int, int]]

    @property
    def ranges(self) -> list[tuple[int, int]]:
        """Each source's range of the spool, ``[first, end)``."""
        return [(c.first, c.end) for c in self.parts]


def read_and_clean(cfg: DataConfig, data: Data, spool: PairSpool, tmp: Path,
                   log: Callable[[str], None]) -> Read:
    """Stage 1: ``data.corpus``, or each of ``data.sources`` in turn, read, normalised and
    cleaned into ``spool`` (:func:`nmt.data.cleaning.read_sources`), the pairs the filters
    removed written to ``tmp``'s rejected.tsv, and duplicates marked as each source is read (a
    source's counts, and the refusal of one left with no pair, count them)."""
    rejected = RejectedWriter(tmp)
    cleaned, parts = read_sources(cfg, data, spool, rejected, log)
    rejected.close()
    synthetic = [(c.first, c.end) for p, c in zip(data.parts, parts, strict=True)
                 if p.source.back_translated] if data.parts else []
    return Read(cleaned, parts, synthetic)


@dataclass
class Split:
    """The split drawn into ``spool.split``: the spools of the given held-out files
    (``data.valid``, ``data.test``), by split, and how many training pairs the excluded
    sources left out."""

    given: dict[str, PairSpool]
    left_out: int


def split_pairs(cfg: DataConfig, data: Data, spool: PairSpool, read: Read,
                excluded: HeldOutSources | None, log: Callable[[str], None]) -> Split:
    """Stage 2: the split of the pairs of ``spool`` that are not duplicates: the grouped split
    (or the given ``data.valid`` / ``data.test`` files, read into spools of their own), the
    back-translated pairs moved to train, then the training pairs whose source ``excluded``
    holds (a continued model's parent's held-out sources) left out of every split. A held-out
    file's sources also in the training data are warned of."""
    given: dict[str, PairSpool] = {}
    for name, corpus in (("valid", data.valid), ("test", data.test)):
        if corpus is not None:
            given[name] = PairSpool(spool.path.with_name(f"{name}.txt"))
            read_pairs(corpus, cfg, given[name], held_out=True, log=log)
    split_spool(spool, 0.0 if "valid" in given else cfg.valid_frac,
                0.0 if "test" in given else cfg.test_frac, cfg.split_seed,
                cfg.valid_size, cfg.test_size)
    if read.synthetic:
        n_synthetic = hold_back_translated_out(spool, read.synthetic)
        if n_synthetic:
            log(f"back-translated: {n_synthetic:,} pairs, their synthetic sources "
                f"tagged {BT_TAG}, all in the train split")
    left_out = 0
    if excluded is not None:
        left_out = hold_out_of_training(spool, excluded)
        log(f"{left_out:,} training pairs whose source is in {excluded.what} dropped from "
            f"training ({len(excluded):,} such sources)")
    real = functools.partial(real_training, spool, read.synthetic)
    for name, held in given.items():
        distinct, overlap = sources_in_common(held, spool, real)
        if overlap:
            log(f"warning: {overlap:,} of the {distinct:,} source sentences of "
                f"data.{name} ({getattr(cfg, name)}) are also in the training data "
                "(data.corpus)")
    return Split(given, left_out)


@dataclass
class Mix:
    """How the training split is written: each source's training pairs ``before`` and ``after``
    its weight, how they enter the mix (``shares``, :func:`weighted_shares`), each source's
    record for meta.json, and the augmentations' plan: which of the weighted real training
    pairs are written again in another case (``case_picks``) and in which forms."""

    ranges: list[tuple[int, int]]
    shares: list[tuple[int, np.ndarray]]
    before: list[int]
    after: list[int]
    sources: list[dict[str, Any]]
    case_picks: np.ndarray
    case_forms: list[str]

    @property
    def n_train(self) -> int:
        """The training split's pairs, augmented ones included."""
        return sum(self.after) + len(self.case_picks)


def weight_and_augment(cfg: DataConfig, data: Data, spool: PairSpool, read: Read,
                       log: Callable[[str], None]) -> Mix:
    """Stage 3: each source's training pairs weighted (a weight that leaves a source none is
    refused) and the training pairs case augmentation writes again picked, seeded, among the
    real ones (a tag in capitals would be no tag)."""
    ranges = read.ranges
    before = [sum(len(chunk) for chunk in spool.indices("train", first, end))
              for first, end in ranges]
    shares = weighted_shares(before, [p.source.weight for p in data.parts] or [1.0],
                             cfg.split_seed)
    after = [whole * n + len(sample) for n, (whole, sample) in zip(before, shares, strict=True)]
    check_weights(data, before, after)
    sources = source_records(data, read, before, after, log)
    n_real = sum(a for a, r in zip(after, ranges, strict=True) if r not in read.synthetic)
    picked = case_picks(n_real, cfg.case_augment, cfg.split_seed)
    if cfg.case_augment and not language(cfg.source).has_case:
        log(f"case augmentation: none, {language(cfg.source).name} is written without "
            "letter case")
        picked = picked[:0]
    return Mix(ranges, shares, before, after, sources, picked, cfg.case_forms.split(","))


def source_records(data: Data, read: Read, before: Sequence[int], after: Sequence[int],
                   log: Callable[[str], None]) -> list[dict[str, Any]]:
    """What meta.json records of each of ``data.sources`` (none for ``data.corpus`` alone):
    its identity, what cleaning kept, its training pairs before and after its weight, said."""
    if not data.parts:
        return []
    sources = []
    for n, (part, own) in enumerate(zip(data.parts, read.parts, strict=True)):
        sources.append({**part.identity(), "read": own.counts["read"],
                        "kept": own.counts["kept"], "filtered": own.filtered,
                        "train_pairs": before[n], "train_pairs_weighted": after[n]})
        log(f"{part.source.label}: {before[n]:,} training pairs x {part.source.weight:g} "
            f"-> {after[n]:,} ({after[n] / max(sum(after), 1):.1%} of the training split)")
    return sources


def tokenize(cfg: DataConfig, given: Tokenizer | None, spool: PairSpool, read: Read, work: Path,
             log: Callable[[str], None]) -> Tokenizer:
    """Stage 4: the ``given`` tokenizer, said, or one trained on the training split as drawn
    (not its weighted copies, nor the augmented pairs), its sides written into ``work``
    first."""
    if given is not None:
        log(f"tokenizer: the given one ({given.kind}, digest {given.digest()[:12]}...)")
        return given
    text = {side: work / f"tokenizer.{side}.txt" for side in ("src", "tgt")}
    with text["src"].open("w", encoding="utf-8") as fs, \
            text["tgt"].open("w", encoding="utf-8") as ft:
        for s, t, _ in tagged_pairs(spool, spool.indices("train"), read.synthetic):
            fs.write(s + "\n")
            ft.write(t + "\n")
    return train_tokenizer(cfg, LineFiles((text["src"],)), LineFiles((text["tgt"],)))


@dataclass
class Written:
    """What the splits were written with: each split's pairs, and the pairs each augmentation
    added to the training split, by the name meta.json's counts give them."""

    pairs: dict[str, int]
    augmented: dict[str, int]


def encode_and_write(cfg: DataConfig, spool: PairSpool, read: Read, split: Split, mix: Mix,
                     tok: Tokenizer, tmp: Path, cache_dir: Path,
                     log: Callable[[str], None]) -> Written:
    """Stage 5: the disk checked, then each split encoded and written into ``tmp`` as it is
    read back from the spool: the training pairs mixed by weight, then the augmented ones, then
    valid and test (a given file's pairs, or the split's); the tokenizer saved beside them."""
    sample = tagged_pairs(spool, weighted_indices(spool, mix), read.synthetic)
    check_disk(tmp, cache_dir, mix.n_train, spool, tok, itertools.islice(sample, DISK_SAMPLE),
               log)
    writers = {k: SplitWriter(tmp, k, tok) for k in SPLITS}
    for triple in tagged_pairs(spool, weighted_indices(spool, mix), read.synthetic):
        writers["train"].add(*triple)
    augmented = augment(cfg, writers["train"], spool, read, mix, log)
    for name in ("valid", "test"):
        held = split.given.get(name)
        pairs = (held.read(range(len(held))) if held else
                 tagged_pairs(spool, spool.indices(name), read.synthetic))
        for triple in pairs:
            writers[name].add(*triple)
    for name, w in writers.items():
        w.close()
        log(f"{name}: {w.pairs:,} pairs, {w.distinct():,} distinct sources")
    vocab = (f"joint vocabulary {tok.src_vocab_size:,}" if tok.joint else
             f"vocabularies src {tok.src_vocab_size:,}, tgt {tok.tgt_vocab_size:,}")
    log(f"tokenizer: {tok.kind}, {vocab}")
    tok.save(tmp)
    return Written({name: w.pairs for name, w in writers.items()}, augmented)


def augment(cfg: DataConfig, writer: SplitWriter, spool: PairSpool, read: Read, mix: Mix,
            log: Callable[[str], None]) -> dict[str, int]:
    """The pairs the augmentations add to the training split after its own, how many by the
    name meta.json's counts give them: the case forms (:mod:`nmt.data.augment`) of the picked
    real training pairs, then the real training pairs span augmentation rewrites."""
    real = (chunk[~within(chunk, read.synthetic)] for chunk in weighted_indices(spool, mix))
    picked = tagged_pairs(spool, at_positions(real, mix.case_picks), read.synthetic)
    case = add_case_forms(writer, picked, mix.case_forms, cfg.source)
    if case:
        log(f"case augmentation: {case:,} training pairs added with the source "
            f"written {', '.join(dict.fromkeys(mix.case_forms))}")
    spans = add_span_forms(writer, real_pairs(spool, mix, read), cfg.span_augment,
                           cfg.split_seed, span_rules(cfg.spans, cfg.glossary, cfg.terms))
    if spans:
        log(f"span augmentation: {spans:,} training pairs added with shared words as "
            "placeholders or tags")
    # counted by name only when added, so a cache built without them keeps its meta.json
    return {"case_augmented": case, **({"span_augmented": spans} if spans else {})}


def real_pairs(spool: PairSpool, mix: Mix, read: Read) -> Iterator[tuple[str, str, str]]:
    """The real (not back-translated) training pairs, weighted, in the order they are written."""
    for chunk in weighted_indices(spool, mix):
        yield from spool.read(chunk[~within(chunk, read.synthetic)].tolist())


def write_meta(cfg: DataConfig, data: Data, read: Read, split: Split, mix: Mix, written: Written,
               excluded: HeldOutSources | None, tmp: Path, seconds: float) -> dict[str, Any]:
    """Stage 5's last step: meta.json written into ``tmp`` (the config, the data's identity,
    every count, the digests of every other file, its own digest) and returned."""
    meta = {"version": CACHE_VERSION, "corpus_sha256": data.corpus.identity.sha256,
            "data": cfg.to_dict(), "corpus": data.identity(),
            "counts": {**read.cleaned.counts, **written.augmented},
            "filtered": read.cleaned.filtered, "sources": mix.sources,
            "longest": {str(words): n for words, n in read.cleaned.longest.items()},
            "pairs": written.pairs,
            **({} if excluded is None else {"excluded": excluded_record(excluded,
                                                                         split.left_out)}),
            "files": file_digests(tmp), "seconds": round(seconds, 2)}
    meta["digest"] = meta_digest(meta)
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return meta


# --- what the stages share --------------------------------------------------------------------


def tagged_pairs(spool: PairSpool, chunks: Iterable[np.ndarray],
                 synthetic: Sequence[tuple[int, int]]) -> Iterator[tuple[str, str, str]]:
    """The pairs of ``spool`` at the indices of ``chunks``, a back-translated source (in one of
    the ``synthetic`` ranges) tagged with :data:`BT_TAG`."""
    for chunk in chunks:
        tagged = within(chunk, synthetic).tolist()
        for tag, (s, t, r) in zip(tagged, spool.read(chunk.tolist()), strict=True):
            yield (f"{BT_TAG} {s}" if tag else s), t, r


def weighted_indices(spool: PairSpool, mix: Mix) -> Iterator[np.ndarray]:
    """The indices of the training pairs, a chunk at a time, each source's weighted."""
    for (first, end), (whole, sample) in zip(mix.ranges, mix.shares, strict=True):
        for _ in range(whole):
            yield from spool.indices("train", first, end)
        yield from at_positions(spool.indices("train", first, end), sample)


def real_training(spool: PairSpool, synthetic: Sequence[tuple[int, int]], start: int,
                  stop: int) -> np.ndarray:
    """Which of the pairs of ``spool`` from ``start`` to ``stop`` are training pairs of a real
    source (in none of the ``synthetic`` ranges)."""
    return spool.kept(start, stop, "train") & ~within(np.arange(start, stop), synthetic)


def train_tokenizer(cfg: DataConfig, src: Sentences, tgt: Sentences) -> Tokenizer:
    if cfg.tokenizer == "word":
        return WordTokenizer.train(src, tgt, min_freq=cfg.min_freq, joint=cfg.joint_vocab)
    tagged = any(s.back_translated for s in cfg.sources)
    return SentencePieceTokenizer.train(
        src, tgt, vocab_size=cfg.vocab_size, model_type=cfg.sp_model_type,
        joint=cfg.joint_vocab, seed=cfg.split_seed, character_coverage=cfg.character_coverage,
        user_symbols=(BT_TAG,) if tagged else (), sample=cfg.sp_sentences,
        characters=cfg.sp_characters, byte_fallback=cfg.byte_fallback,
        span_pieces=cfg.span_pieces)


def within(indices: np.ndarray, ranges: Sequence[tuple[int, int]]) -> np.ndarray:
    """Which of ``indices`` fall in one of ``ranges`` (``[first, end)`` each)."""
    inside = np.zeros(len(indices), bool)
    for first, end in ranges:
        inside |= (indices >= first) & (indices < end)
    return inside


def at_positions(chunks: Iterable[np.ndarray], positions: np.ndarray) -> Iterator[np.ndarray]:
    """The values at ``positions`` (ascending) of ``chunks`` joined end to end."""
    seen = 0
    for chunk in chunks:
        lo, hi = np.searchsorted(positions, [seen, seen + len(chunk)])
        if hi > lo:
            yield chunk[positions[lo:hi] - seen]
        seen += len(chunk)


def weighted_shares(counts: Sequence[int], weights: Sequence[float],
                    seed: int) -> list[tuple[int, np.ndarray]]:
    """How each source's ``counts[k]`` training pairs enter the mix, ``round(weight x count)``
    times in all: ``(whole, sample)``, every pair ``whole`` times, then those at the positions
    ``sample`` (ascending, a seeded sample without replacement) once more (weight 2.5: every
    pair twice and half of them once more; 0.5: half of them)."""
    rng = np.random.default_rng(seed)
    shares = []
    for n, weight in zip(counts, weights, strict=True):
        if not n:
            shares.append((0, np.zeros(0, np.int64)))
            continue
        whole, rest = divmod(round(weight * n), n)
        shares.append((whole, np.sort(rng.choice(n, rest, replace=False))))
    return shares


def sources_in_common(held: PairSpool, spool: PairSpool,
                      train: Callable[[int, int], np.ndarray]) -> tuple[int, int]:
    """How many distinct sources ``held`` has, and how many of them a training pair of
    ``spool`` has too (``train(start, stop)``: which of the pairs from ``start`` to ``stop`` are
    real training pairs); the hashes are matched a bucket at a time on disk."""
    with HashBuckets(held.path.with_name(held.path.name + ".common"),
                     len(held) + len(spool)) as buckets:
        for at, hashes in held.source_hashes.chunks():
            buckets.add(hashes, -1 - np.arange(at, at + len(hashes)))  # held: negative
        buckets.add_column(spool.source_hashes, train)
        distinct = common = 0
        for hashes, indices in buckets.buckets():
            ours = np.unique(hashes[indices < 0])
            distinct += len(ours)
            common += int(np.isin(ours, hashes[indices >= 0]).sum())
    return distinct, common


def excluded_record(excluded: HeldOutSources, left_out: int) -> dict[str, Any]:
    """What a cache's ``meta.json`` (and a run's ``corpus.json``) says of the sources its
    training split left out: where they come from, how many, their digest (the one in the
    cache's key) and the training pairs that left."""
    return {"what": excluded.what, "sources": len(excluded), "sha256": excluded.digest(),
            "training_pairs": left_out}


def check_weights(data: Data, before: Sequence[int], after: Sequence[int]) -> None:
    """A source whose weight leaves none of its training pairs is refused, naming the smallest
    weight that keeps one: its pairs would otherwise go only to valid and test, and its licence
    be listed for a model that never saw it (``data.corpus`` alone has no weight)."""
    if not data.parts:
        return
    for n, (part, was, now) in enumerate(zip(data.parts, before, after, strict=True), 1):
        if was and not now:
            raise ConfigError(f"data.sources[{n}].weight: {part.source.weight:g} x {was:,} "
                              f"training pairs of {part.source.label} leaves none; expected at "
                              f"least {smallest_weight(was):g}, which keeps one")


def smallest_weight(pairs: int) -> float:
    """A weight of three significant digits, no less than ``1 / pairs``: one of ``pairs``
    training pairs kept."""
    step = 10.0 ** (math.floor(math.log10(1 / pairs)) - 2)
    return math.ceil(1 / pairs / step) * step


DISK_SAMPLE = 2000  # training pairs encoded to measure what a pair takes in the cache
DISK_MARGIN = 1.25  # and a quarter more, as the rest of the split may run longer


def check_disk(tmp: Path, cache_dir: Path, n_train: int, spool: PairSpool, tok: Tokenizer,
               sample: Iterable[tuple[str, str, str]], log: Callable[[str], None]) -> None:
    """Say the training split's size and the disk it needs before it is written, and refuse
    what the disk cannot hold: a pair's bytes are measured on ``sample`` (its text in the three
    text files, its ids, offsets and source hash) with :data:`DISK_MARGIN`; the held-out
    splits are counted from the spool's pairs at the same rate."""
    pairs = list(sample)
    if not pairs:
        return
    text = sum(len(s.encode()) + len(t.encode()) + len(r.encode()) + 3 for s, t, r in pairs)
    ids = sum(map(len, tok.encode_src_batch([s for s, _, _ in pairs])))
    ids += sum(map(len, tok.encode_tgt_batch([t for _, t, _ in pairs])))
    per_pair = DISK_MARGIN * (text + 4 * ids) / len(pairs) + 2 * 8 + 8
    need = int(per_pair * (n_train + len(spool)))
    free = shutil.disk_usage(tmp).free
    log(f"training split: {n_train:,} pairs, about {_bytes(need)} on disk with valid and test "
        f"({_bytes(free)} free)")
    if need > free:
        raise DataError(f"{cache_dir}: the cache needs about {_bytes(need)} ({n_train:,} "
                        f"training pairs), but {_bytes(free)} is free on its disk; lower the "
                        "weights of data.sources, data.case_augment or data.max_pairs, or free "
                        "space")


def _bytes(n: float) -> str:
    for unit in ("bytes", "kB", "MB", "GB"):
        if n < 1000:
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.3g} {unit}"
        n /= 1000
    return f"{n:,.3g} TB"


def record(data: Data, meta: dict[str, Any]) -> dict[str, Any]:
    """What a run records of its data (``corpus.json``): the data's identity and, for several
    sources, each one's counts as the cache has them (read, kept, removed by each filter,
    training pairs before and after its weight)."""
    identity = data.identity()
    counts, filtered = meta.get("counts"), meta.get("filtered")
    if isinstance(counts, dict) and isinstance(filtered, dict):  # what cleaning kept, all told
        identity["cleaning"] = {"read": counts.get("read"), "kept": counts.get("kept"),
                                "duplicates": counts.get("duplicates"),
                                "too_long": counts.get("too_long"), "filtered": filtered}
    if isinstance(meta.get("excluded"), dict):  # what its training split left out
        identity["excluded"] = meta["excluded"]
    counted = meta.get("sources")
    if identity.get("sources") and isinstance(counted, list) and len(counted) == len(
            identity["sources"]):
        identity["sources"] = [{**mine, **{k: v for k, v in theirs.items() if k in SOURCE_COUNTS}}
                               for mine, theirs in zip(identity["sources"], counted, strict=True)
                               if isinstance(theirs, dict)]
    return identity


SOURCE_COUNTS = ("read", "kept", "filtered", "train_pairs", "train_pairs_weighted")
