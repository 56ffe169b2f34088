"""The first stage of building a cache: the declared corpora read, normalised and cleaned into a
:class:`nmt.data.spool.PairSpool`, duplicates marked.

Each raw pair is judged alone (:class:`PairRules`, so that pairs are judged on every usable CPU,
:mod:`nmt.data.parallel_pairs`): normalised, dropped when empty, over ``data.max_words``,
removed by a filter (:mod:`nmt.data.filters`) or with a side in another language
(:mod:`nmt.data.langid`); its :class:`Verdict` says which. :func:`read_pairs` reads one corpus,
:func:`read_sources` the corpus or each of ``data.sources`` in turn; what they kept and dropped
is a :class:`Cleaned`, said by :func:`cleaning_report`.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from nmt.config import DataConfig
from nmt.data.cache import RejectedWriter
from nmt.data.corpora import Corpus, Data
from nmt.data.filters import first_failed, judged_spans
from nmt.data.filters import parse as parse_filters
from nmt.data.langid import LanguageCheck
from nmt.data.languages import Language, language
from nmt.data.normalize import normalize
from nmt.data.parallel_pairs import judged_pairs
from nmt.data.spans import SpanRules
from nmt.data.spool import PairSpool
from nmt.errors import DataError


def reference_text(raw: str, normalized: str, cfg: DataConfig) -> str:
    """What a translation is scored against: natural text is scored against the target as the
    corpus writes it (sacrebleu's own tokenizer does the rest, as published scores are
    computed); the textbook's lower-cased, spaced text against the target normalised the same
    way, so a model trained on it is not scored on case."""
    return raw.strip() if cfg.natural_text else normalized


def length_in_words(text: str, lang: Language) -> int:
    """Words for ``max_words``: :meth:`Language.words` (those with a letter or digit; in a
    script written without spaces its characters as words of the same length), rounded up."""
    return math.ceil(lang.words(text))


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


class Verdict(NamedTuple):
    """One raw pair judged: its normalised sides and reference, the words of its longer side,
    why it is dropped (None: kept, unless it is a duplicate) and the languages found on its
    sides (None: not judged)."""

    src: str
    tgt: str
    ref: str
    words: int
    dropped: str | None  # "empty", "too_long", a filter's name or one of LANGID_SIDES
    found: tuple[str | None, str | None] = (None, None)


@dataclass(frozen=True)
class PairRules:
    """What decides one raw pair's :class:`Verdict`, alone (so that pairs are judged in any
    process, in any order)."""

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
        todo = [i for i, v in enumerate(alone) if v.dropped is None]
        judged = self.check.judge_many([(alone[i].src, alone[i].tgt) for i in todo])
        for i, (found, side) in zip(todo, judged, strict=True):
            dropped = None if side is None else LANGID_SIDES[side]
            alone[i] = alone[i]._replace(dropped=dropped, found=found)
        return alone

    def verdict(self, raw_src: str, raw_tgt: str) -> Verdict:
        """One raw pair's verdict before the language check (:meth:`verdicts` adds it)."""
        cfg = self.cfg
        s = normalize(raw_src, cfg.lowercase, cfg.normalization, lang=cfg.source)
        t = normalize(raw_tgt, cfg.lowercase, cfg.normalization, lang=cfg.target,
                      apostrophes=cfg.target_apostrophes == "straight")
        ref = reference_text(raw_tgt, t, cfg)
        if not s.strip() or not t.strip():
            return Verdict(s, t, ref, 0, "empty")
        if self.held_out:
            return Verdict(s, t, ref, 0, None)
        src_lang, tgt_lang = language(cfg.source), language(cfg.target)
        words = max(length_in_words(s, src_lang), length_in_words(t, tgt_lang))
        if cfg.max_words and words > cfg.max_words:
            return Verdict(s, t, ref, words, "too_long")  # more than max_words on a side
        failed = first_failed(s, t, src_lang, tgt_lang, self.chosen,
                              self.spans) if self.chosen else None
        return Verdict(s, t, ref, words, failed)


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
    for v in judged_pairs(rules, pairs, workers):
        counts["read"] += 1
        if v.dropped == "empty":
            counts["empty"] += 1
            continue
        if not held_out:
            longest[min(v.words, LONGEST_COUNTED)] += 1
            if check is not None:
                check.tally(v.found)
            if v.dropped == "too_long":
                counts["too_long"] += 1
                continue
            if v.dropped:
                counts["filtered"] += 1
                filtered[v.dropped] += 1
                if rejected is not None:
                    rejected.add(v.dropped, v.src, v.tgt)
                continue
        spool.add(v.src, v.tgt, v.ref)
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
