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
again, the source in the textbook's form (:func:`nmt.data.normalize.textbook_form`).

A cache is built in a temporary directory and renamed into place, so it is complete or absent
(:mod:`nmt.data.cache`: the arrays, the key, the writing and the checked reading). It is built
a pair at a time (:func:`build_cache`): the cleaned pairs and their hashes wait in a spool on
disk (:mod:`nmt.data.spool`), duplicates and the split's groups are found a bucket of hashes at a
time (:mod:`nmt.data.hash_buckets`), and each split is encoded and written as it is read back,
so memory grows by a byte a pair, not by the corpus' text.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import shutil
import time
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nmt.config import CASE_FORM_NAMES, DataConfig
from nmt.data import hash_buckets
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
from nmt.data.corpora import Corpus, Data, open_data
from nmt.data.filters import first_failed, judged_spans
from nmt.data.filters import parse as parse_filters
from nmt.data.hash_buckets import HashBuckets
from nmt.data.langid import LanguageCheck
from nmt.data.languages import Language, language
from nmt.data.normalize import normalize, textbook_form, upper
from nmt.data.parallel_pairs import judged_pairs
from nmt.data.spans import SpanRules
from nmt.data.split import HeldOutSources, hold_out_of_training, split_spool
from nmt.data.spool import SPLIT, SPLIT_CODES, SPLIT_SHIFT, PairSpool, in_split
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


@dataclass
class Cleaned:
    """What reading one corpus kept and dropped: the counts of what was read and dropped, what
    each filter removed, and the pairs by the words of their longer side. Its pairs, duplicates
    marked, are those of the spool from ``first`` to ``end`` (:class:`nmt.data.spool.PairSpool`);
    the pairs the filters removed went to rejected.tsv."""

    counts: dict[str, int]
    filtered: dict[str, int]
    longest: dict[int, int]  # pairs by the words of their longer side (LONGEST_COUNTED: more)
    first: int = 0
    end: int = 0


LONGEST_COUNTED = 1000  # longer sides are counted as this many words


def suggested_max_words(longest: dict[int, int], keep: float = 0.99) -> int:
    """The smallest ``data.max_words`` that keeps ``keep`` of the pairs counted in ``longest``
    (pairs by the words of their longer side)."""
    total, running = sum(longest.values()), 0
    for words, n in sorted(longest.items()):
        running += n
        if running >= keep * total:
            return words
    return max(longest, default=0)


LANGID_SIDES = ("langid_source", "langid_target")  # how the language check's removals count


def side_names(corpus: Corpus, cfg: DataConfig) -> tuple[str, str]:
    """How messages name the text of each side: its file, or the file and the language."""
    files = corpus.identity.files or [corpus.identity.corpus]
    if len(files) == 2:
        return files[0], files[1]
    return f"{files[0]} ({cfg.source} side)", f"{files[0]} ({cfg.target} side)"


# why a pair is dropped before the duplicates: "empty", "too_long", a filter, a LANGID_SIDES
Verdict = tuple[str, str, str, int, str | None, tuple[str | None, str | None]]


@dataclass(frozen=True)
class PairRules:
    """What decides one raw pair's fate, alone (so that pairs are judged in any process, in
    any order): its normalised sides and reference, the words of its longer side, why it is
    dropped (None: kept, unless it is a duplicate) and the languages found on its sides."""

    cfg: DataConfig
    held_out: bool
    chosen: dict[str, float]  # the filters and their parameters
    check: LanguageCheck | None
    spans: SpanRules = SpanRules()  # what the filters judge the text around

    def verdicts(self, pairs: Sequence[tuple[str, str]]) -> list[Verdict]:
        """The verdict of each raw pair: normalised and filtered one by one, then the sides of
        those still kept language-checked all at once."""
        alone = [self.verdict(s, t) for s, t in pairs]
        if self.check is None:
            return alone
        todo = [i for i, v in enumerate(alone) if v[4] is None]
        judged = self.check.judge_many([(alone[i][0], alone[i][1]) for i in todo])
        for i, (found, side) in zip(todo, judged, strict=True):
            s, t, ref, words, _, _ = alone[i]
            alone[i] = (s, t, ref, words, None if side is None else LANGID_SIDES[side], found)
        return alone

    def verdict(self, raw_src: str, raw_tgt: str) -> Verdict:
        """One raw pair's verdict before the language check (:meth:`verdicts` adds it)."""
        cfg = self.cfg
        s = normalize(raw_src, cfg.lowercase, cfg.normalization, lang=cfg.source)
        t = normalize(raw_tgt, cfg.lowercase, cfg.normalization, lang=cfg.target,
                      apostrophes=cfg.target_apostrophes == "straight")
        ref = reference_text(raw_tgt, t, cfg)
        if not s.strip() or not t.strip():
            return s, t, ref, 0, "empty", (None, None)
        if self.held_out:
            return s, t, ref, 0, None, (None, None)
        src_lang, tgt_lang = language(cfg.source), language(cfg.target)
        words = max(length_in_words(s, src_lang), length_in_words(t, tgt_lang))
        if cfg.max_words and words > cfg.max_words:
            return s, t, ref, words, "too_long", (None, None)  # more than max_words on a side
        failed = first_failed(s, t, src_lang, tgt_lang, self.chosen,
                              self.spans) if self.chosen else None
        return s, t, ref, words, failed, (None, None)


def read_pairs(corpus: Corpus, cfg: DataConfig, spool: PairSpool, *, held_out: bool = False,
               rejected: RejectedWriter | None = None, log: Callable[[str], None] = print,
               workers: int | None = None) -> Cleaned:
    """Normalised, cleaned (source, target) pairs of the first ``cfg.max_pairs`` pairs,
    appended to ``spool``: empty ones dropped, then those over ``max_words``, then those a
    filter removes (:mod:`nmt.data.filters`) or whose side is in another language
    (:mod:`nmt.data.langid`), written to ``rejected``; then duplicates (of this corpus' pairs or
    those already in the spool) are marked. A large corpus is judged on every usable CPU
    (:mod:`nmt.data.parallel_pairs`; ``workers``: how many, by default all). Memory does not
    grow with the corpus but by the spool's byte a pair.

    ``held_out``: a ``data.valid`` / ``data.test`` file, used as it is: all its pairs, only
    those empty after cleaning dropped (not the long ones, not the filtered, not the
    duplicates)."""
    pairs = corpus.pairs()
    if cfg.max_pairs and not held_out:
        pairs = itertools.islice(pairs, cfg.max_pairs)
    counts = dict(read=0, empty=0, too_long=0, filtered=0, duplicates=0, kept=0)
    chosen = {} if held_out else parse_filters(cfg.filters)
    check = None
    if cfg.langid and not held_out:
        check = LanguageCheck(cfg.source, cfg.target, side_names(corpus, cfg), log)
    rules = PairRules(cfg, held_out, chosen, check, judged_spans(cfg.spans))
    longest: Counter[int] = Counter()  # pairs by their longer side in words (for a max_words)
    filtered = dict.fromkeys([*chosen, *(LANGID_SIDES if check else ())], 0)
    first = len(spool)
    for s, t, r, words, failed, judged in judged_pairs(rules, pairs, workers):
        counts["read"] += 1
        if failed == "empty":
            counts["empty"] += 1
            continue
        if not held_out:
            longest[min(words, LONGEST_COUNTED)] += 1
            if check is not None:
                check.tally(judged)
            if failed == "too_long":
                counts["too_long"] += 1
                continue
            if failed:
                counts["filtered"] += 1
                filtered[failed] += 1
                if rejected is not None:
                    rejected.add(failed, s, t)
                continue
        spool.add(s, t, r)
    if cfg.dedup and not held_out:
        counts["duplicates"] = spool.mark_duplicates(first)
    counts["kept"] = len(spool) - first - counts["duplicates"]
    if check is not None:
        check.check_files()
    if not counts["kept"]:
        ident = corpus.identity
        files = ", ".join(ident.files) or ident.corpus
        most = max(filtered, key=filtered.__getitem__, default=None)
        why = ""
        if most is not None and filtered[most]:
            why = f"; most by {most}: {filtered[most]:,}"
            if most == "script":  # every pair's side in another script: not a noisy corpus
                why += (f" (a side not written in the script of its language: are the files "
                        f"swapped, or data.source = {cfg.source!r} and data.target = "
                        f"{cfg.target!r} wrong?)")
        raise DataError(f"{files}: no usable {cfg.source}-{cfg.target} pairs in "
                        f"{counts['read']:,} read ({counts['empty']:,} empty after cleaning, "
                        f"{counts['too_long']:,} over data.max_words = {cfg.max_words}, "
                        f"{counts['filtered']:,} removed by data.filters or data.langid, "
                        f"{counts['duplicates']:,} duplicates{why})")
    return Cleaned(counts, filtered, dict(sorted(longest.items())), first, len(spool))


def counted(n: int, of: int, what: str) -> str:
    """``"1,234 duplicates (0.74%)"``: a count, what it counts and its share of ``of``."""
    return f"{n:,} {what} ({n / of:.2%})" if of else f"{n:,} {what}"


def cleaning_report(cleaned: Cleaned, cfg: DataConfig) -> list[str]:
    """What reading the corpus kept and dropped, as ``nmt data prepare`` prints it: each count
    with its share of the pairs read, and what each filter removed."""
    c, read = cleaned.counts, cleaned.counts["read"]
    too_long = counted(c["too_long"], read, f"over data.max_words = {cfg.max_words}")
    if c["too_long"]:
        too_long += (f" (99% of the pairs have at most {suggested_max_words(cleaned.longest)} "
                     "words on a side)")
    duplicates = "duplicate" if c["duplicates"] == 1 else "duplicates"
    lines = [f"read {read:,} pairs; kept {counted(c['kept'], read, 'pairs')}; dropped "
             f"{counted(c['duplicates'], read, duplicates)}, "
             f"{counted(c['empty'], read, 'empty')}, {too_long}"]
    if cleaned.filtered:
        removed = ", ".join(counted(n, read, name) for name, n in cleaned.filtered.items() if n)
        lines.append(f"data.filters removed {counted(c['filtered'], read, 'pairs')}: "
                     f"{removed or 'none'} (rejected.tsv in the cache lists them)")
    return lines


def title_case(text: str, lang: str | None = None) -> str:
    """Each space-separated word with a capital first letter (``"I'm Home."``; ``str.title``
    would write ``"I'M Home."``), in ``lang``'s capitals (Turkish ``istanbul`` -> ``İstanbul``)."""
    return " ".join(upper(w[:1], lang) + w[1:] for w in text.split(" "))


# The forms case augmentation can write a source in (data.case_forms names them, in turn):
# each takes the sentence and its language
CASE_FORMS: dict[str, Callable[[str, str | None], str]] = dict(
    zip(CASE_FORM_NAMES, (textbook_form, upper, title_case), strict=True))


def case_picks(n: int, share: float, seed: int) -> np.ndarray:
    """Which of ``n`` training pairs case augmentation writes again (ascending): a random
    ``share`` of them, seeded."""
    if share <= 0 or not n:
        return np.zeros(0, np.int64)
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n, size=round(share * n), replace=False))


def in_case_form(src: str, k: int, forms: Sequence[str], lang: str | None) -> str | None:
    """The ``k``-th picked source written in the ``k``-th of ``forms`` in turn (names of
    :data:`CASE_FORMS`; ``lang``: the source's language, for its capitals); None where it is
    already in that form (it is not repeated)."""
    noisy = CASE_FORMS[forms[k % len(forms)]](src, lang)
    return None if noisy == src else noisy


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


def hold_back_translated_out(spool: PairSpool, ranges: Sequence[tuple[int, int]]) -> int:
    """The pairs of back-translated sources (``back_translated = true``; ``ranges`` of the spool
    hold them) moved from valid and test to train: their sources are synthetic. In training
    their sources are marked with :data:`BT_TAG` (:func:`build_cache`), so the model tells them
    from real ones and translation (untagged input) reads like the real data. Returns how many
    pairs (not duplicates) they hold."""
    fate, train, held = spool.fate(), np.uint8(SPLIT_CODES["train"] << SPLIT_SHIFT), 0
    for first, end in ranges:
        for at in range(first, end, hash_buckets.CHUNK):
            part = fate[at:min(at + hash_buckets.CHUNK, end)]  # a view: written through
            kept = in_split(part)
            part[kept] = (part[kept] & ~SPLIT) | train
            held += int(kept.sum())
    return held


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


# --- building the cache ----------------------------------------------------------------------


def read_sources(
    cfg: DataConfig, data: Data, spool: PairSpool, rejected: RejectedWriter,
    log: Callable[[str], None],
) -> tuple[Cleaned, list[Cleaned]]:
    """``data.corpus``, or each of ``data.sources`` in turn (its own filters; a pair of an
    earlier source is a duplicate), read and cleaned into ``spool``: the counts of them all as
    one :class:`Cleaned`, and each source's own (its pairs are those of the spool from its
    ``first`` to its ``end``)."""
    if not data.parts:
        cleaned = read_pairs(data.corpus, cfg, spool, rejected=rejected, log=log)
        for line in cleaning_report(cleaned, cfg):
            log(line)
        return cleaned, [cleaned]
    parts = []
    for part in data.parts:
        own = dataclasses.replace(cfg, filters=part.source.filters or cfg.filters)
        cleaned = read_pairs(part.corpus, own, spool, rejected=rejected, log=log)
        for line in cleaning_report(cleaned, own):
            log(f"{part.source.label}: {line}")
        parts.append(cleaned)
    counts: Counter[str] = Counter()
    filtered: Counter[str] = Counter()
    longest: Counter[int] = Counter()
    for c in parts:
        counts.update(c.counts)
        filtered.update(c.filtered)
        longest.update(c.longest)
    merged = Cleaned(dict(counts),
                     {k: filtered[k] for k in dict.fromkeys(k for c in parts for k in c.filtered)},
                     dict(sorted(longest.items())), 0, len(spool))
    return merged, parts


def split_pairs(
    cfg: DataConfig, data: Data, spool: PairSpool, synthetic: Sequence[tuple[int, int]],
    excluded: HeldOutSources | None, log: Callable[[str], None],
) -> tuple[dict[str, PairSpool], int]:
    """The split of the pairs of ``spool``, written into their fates: the grouped split (or the
    given ``data.valid`` / ``data.test`` files, read into spools of their own, which it returns),
    the back-translated pairs (the spool's ``synthetic`` ranges) moved to train, then the
    training pairs whose source ``excluded`` holds left out of every split (how many, returned
    second). A held-out file's sources also in the training data are warned of."""
    given: dict[str, PairSpool] = {}
    for name, corpus in (("valid", data.valid), ("test", data.test)):
        if corpus is not None:
            given[name] = PairSpool(spool.path.with_name(f"{name}.txt"))
            read_pairs(corpus, cfg, given[name], held_out=True, log=log)
    split_spool(spool, 0.0 if "valid" in given else cfg.valid_frac,
                0.0 if "test" in given else cfg.test_frac, cfg.split_seed,
                cfg.valid_size, cfg.test_size)
    if synthetic:
        n_synthetic = hold_back_translated_out(spool, synthetic)
        if n_synthetic:
            log(f"back-translated: {n_synthetic:,} pairs, their synthetic sources "
                f"tagged {BT_TAG}, all in the train split")
    left_out = 0
    if excluded is not None:
        left_out = hold_out_of_training(spool, excluded)
        log(f"{left_out:,} training pairs whose source is in {excluded.what} dropped from "
            f"training ({len(excluded):,} such sources)")

    def real_training(start: int, stop: int) -> np.ndarray:
        return (in_split(spool.fate()[start:stop], "train")
                & ~within(np.arange(start, stop), synthetic))

    for name, held in given.items():
        distinct, overlap = sources_in_common(held, spool, real_training)
        if overlap:
            log(f"warning: {overlap:,} of the {distinct:,} source sentences of "
                f"data.{name} ({getattr(cfg, name)}) are also in the training data "
                "(data.corpus)")
    return given, left_out


def build_cache(
    cfg: DataConfig, data: Data, cache_dir: Path, *, log: Callable[[str], None] = print,
    tokenizer: Tokenizer | None = None, excluded: HeldOutSources | None = None,
    replace: bool = True,
) -> Prepared:
    """Read, clean, split, tokenize and write the cache of ``data``, a pair at a time: the
    cleaned pairs and their hashes wait on disk (:mod:`nmt.data.spool`), duplicates and the
    split's groups are found a bucket of hashes at a time (:mod:`nmt.data.hash_buckets`), each
    pair's fate is a byte in memory, and each split is written as it is read back
    (:class:`SplitWriter`), so memory grows by that byte a pair (and four a distinct source
    while the split is drawn), not by the pairs' text or hashes."""
    t0 = time.perf_counter()
    with building(cache_dir, replace) as tmp:
        work = tmp / WORK
        spool = PairSpool(work / "pairs.txt")
        rejected = RejectedWriter(tmp)
        cleaned, parts = read_sources(cfg, data, spool, rejected, log)
        rejected.close()
        sourced = list(zip(data.parts, parts, strict=True)) if data.parts else []
        synthetic = [(c.first, c.end) for p, c in sourced if p.source.back_translated]
        given, left_out = split_pairs(cfg, data, spool, synthetic, excluded, log)

        def pairs(chunks: Iterable[np.ndarray]) -> Iterator[tuple[str, str, str]]:
            """The pairs of the spool at the indices of ``chunks``, a back-translated source
            tagged."""
            for chunk in chunks:
                tagged = within(chunk, synthetic).tolist()
                for tag, (s, t, r) in zip(tagged, spool.read(chunk.tolist()), strict=True):
                    yield (f"{BT_TAG} {s}" if tag else s), t, r

        tok = tokenizer_of(cfg, tokenizer, pairs(spool.indices("train")), work, log)
        ranges = [(c.first, c.end) for c in parts]
        before = [sum(len(chunk) for chunk in spool.indices("train", first, end))
                  for first, end in ranges]
        shares = weighted_shares(before, [p.source.weight for p in data.parts] or [1.0],
                                 cfg.split_seed)
        after = [whole * n + len(sample) for n, (whole, sample) in zip(before, shares,
                                                                        strict=True)]

        def mix() -> Iterator[np.ndarray]:
            """The indices of the training pairs, each source's weighted."""
            for (first, end), (whole, sample) in zip(ranges, shares, strict=True):
                for _ in range(whole):
                    yield from spool.indices("train", first, end)
                yield from at_positions(spool.indices("train", first, end), sample)

        check_weights(data, before, after)
        sources: list[dict[str, Any]] = []
        for n, (part, own) in enumerate(sourced):
            sources.append({**part.identity(), "read": own.counts["read"],
                            "kept": own.counts["kept"], "filtered": own.filtered,
                            "train_pairs": before[n], "train_pairs_weighted": after[n]})
            log(f"{part.source.label}: {before[n]:,} training pairs x {part.source.weight:g} "
                f"-> {after[n]:,} ({after[n] / max(sum(after), 1):.1%} of the training split)")
        # only real sources are written in other cases: a tag in capitals is no tag
        n_real = sum(a for a, r in zip(after, ranges, strict=True) if r not in synthetic)
        picked = case_picks(n_real, cfg.case_augment, cfg.split_seed)
        forms = cfg.case_forms.split(",")
        if cfg.case_augment and not language(cfg.source).has_case:
            log(f"case augmentation: none, {language(cfg.source).name} is written without "
                "letter case")
            picked = picked[:0]
        check_disk(tmp, cache_dir, sum(after) + len(picked), spool, tok,
                   itertools.islice(pairs(mix()), DISK_SAMPLE), log)
        writers = {k: SplitWriter(tmp, k, tok) for k in SPLITS}
        for triple in pairs(mix()):
            writers["train"].add(*triple)
        real = (chunk[~within(chunk, synthetic)] for chunk in mix())
        augmented = add_case_forms(writers["train"], pairs(at_positions(real, picked)), forms,
                                   cfg.source)
        if augmented:
            log(f"case augmentation: {augmented:,} training pairs added with the source "
                f"written {', '.join(dict.fromkeys(forms))}")
        for name in ("valid", "test"):  # a given file's pairs, or the split's
            held = given.get(name)
            for triple in held.read(range(len(held))) if held else pairs(spool.indices(name)):
                writers[name].add(*triple)
        for name, w in writers.items():
            w.close()
            log(f"{name}: {w.pairs:,} pairs, {w.distinct():,} distinct sources")
        vocab = (f"joint vocabulary {tok.src_vocab_size:,}" if tok.joint else
                 f"vocabularies src {tok.src_vocab_size:,}, tgt {tok.tgt_vocab_size:,}")
        log(f"tokenizer: {tok.kind}, {vocab}")
        tok.save(tmp)
        for spooled in (spool, *given.values()):
            spooled.close()
        counts = {**cleaned.counts, "case_augmented": augmented}
        meta = {"version": CACHE_VERSION, "corpus_sha256": data.corpus.identity.sha256,
                "data": cfg.to_dict(), "corpus": data.identity(), "counts": counts,
                "filtered": cleaned.filtered, "sources": sources,
                "longest": {str(words): n for words, n in cleaned.longest.items()},
                "pairs": {name: w.pairs for name, w in writers.items()},
                **({} if excluded is None else {"excluded": excluded_record(excluded,
                                                                             left_out)}),
                "files": file_digests(tmp), "seconds": round(time.perf_counter() - t0, 2)}
        meta["digest"] = meta_digest(meta)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    log(f"prepared in {meta['seconds']:.1f} s: {cache_dir}")
    prepared = load_cache(cache_dir)
    prepared.identity = record(data, meta)
    return prepared


def add_case_forms(writer: SplitWriter, picked: Iterable[tuple[str, str, str]],
                   forms: Sequence[str], lang: str) -> int:
    """The ``picked`` training pairs added to ``writer`` again, the source in the case forms
    ``forms`` in turn (:func:`in_case_form`; one already in its form is not); how many."""
    added = 0
    for nth, (s, t, r) in enumerate(picked):
        noisy = in_case_form(s, nth, forms, lang)
        if noisy is not None:
            writer.add(noisy, t, r)
            added += 1
    return added


def excluded_record(excluded: HeldOutSources, left_out: int) -> dict[str, Any]:
    """What a cache's ``meta.json`` (and a run's ``corpus.json``) says of the sources its
    training split left out: where they come from, how many, their digest (the one in the
    cache's key) and the training pairs that left."""
    return {"what": excluded.what, "sources": len(excluded), "sha256": excluded.digest(),
            "training_pairs": left_out}


def tokenizer_of(cfg: DataConfig, given: Tokenizer | None,
                 train: Iterable[tuple[str, str, str]], work: Path,
                 log: Callable[[str], None]) -> Tokenizer:
    """The ``given`` tokenizer, said, or one trained on the ``train`` pairs (the training split
    as written, not its weighted copies), their sides written into ``work`` first."""
    if given is not None:
        log(f"tokenizer: the given one ({given.kind}, digest {given.digest()[:12]}...)")
        return given
    text = {side: work / f"tokenizer.{side}.txt" for side in ("src", "tgt")}
    with text["src"].open("w", encoding="utf-8") as fs, \
            text["tgt"].open("w", encoding="utf-8") as ft:
        for s, t, _ in train:
            fs.write(s + "\n")
            ft.write(t + "\n")
    return train_tokenizer(cfg, LineFiles((text["src"],)), LineFiles((text["tgt"],)))


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


