"""Per-split statistics of a prepared corpus, and their table for ``nmt data stats``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rich.table import Table

from nmt.data.cache import CHECK_CHUNK, Prepared, Split
from nmt.data.spool import text_hash
from nmt.data.tokenizers import UNK_ID

PERCENTILES = (50, 90, 99, 100)


@dataclass(frozen=True)
class SplitStats:
    name: str
    pairs: int
    sources: int  # distinct normalised source sentences
    refs_mean: float  # target references per distinct source
    refs_max: int
    src_len: tuple[int, ...]  # token-length percentiles PERCENTILES (without <eos>)
    tgt_len: tuple[int, ...]
    src_unk: float  # share of source tokens that are <unk>
    tgt_unk: float
    src_types: int  # distinct token ids used
    tgt_types: int


def _percentiles(lengths: np.ndarray) -> tuple[int, ...]:
    if len(lengths) == 0:
        return tuple(0 for _ in PERCENTILES)
    return tuple(int(v) for v in np.percentile(lengths, PERCENTILES, method="higher"))


def _id_counts(ids: np.ndarray) -> np.ndarray:
    """How often each id occurs, counted a chunk at a time (``ids`` may be a memory-mapped
    array of a large corpus)."""
    counts = np.zeros(int(ids.max()) + 1 if len(ids) else 1, np.int64)
    for i in range(0, len(ids), CHECK_CHUNK):
        chunk = np.bincount(np.asarray(ids[i:i + CHECK_CHUNK]))
        counts[:len(chunk)] += chunk
    return counts


def split_stats(split: Split) -> SplitStats:
    # references per distinct source, from hashes of the sources (8 bytes a pair, not the text)
    hashes = np.fromiter(map(text_hash, split.src_text), np.int64, len(split))
    n_refs = np.unique(hashes, return_counts=True)[1] if len(hashes) else np.zeros(1, np.int64)
    src, tgt = _id_counts(split.src_ids), _id_counts(split.tgt_ids)
    return SplitStats(
        name=split.name, pairs=len(split), sources=len(n_refs) if len(hashes) else 0,
        refs_mean=float(n_refs.mean()), refs_max=int(n_refs.max()),
        src_len=_percentiles(split.src_lengths()), tgt_len=_percentiles(split.tgt_lengths()),
        src_unk=float(src[UNK_ID] / src.sum()) if src.sum() and len(src) > UNK_ID else 0.0,
        tgt_unk=float(tgt[UNK_ID] / tgt.sum()) if tgt.sum() and len(tgt) > UNK_ID else 0.0,
        src_types=int(np.count_nonzero(src)), tgt_types=int(np.count_nonzero(tgt)),
    )


def stats_table(prepared: Prepared) -> Table:
    """One column per split, one row per figure (fits an 80-column terminal)."""
    tok = prepared.tokenizer
    rows = [split_stats(split) for split in prepared.splits.values()]
    pcts = "/".join(f"p{p}" if p < 100 else "max" for p in PERCENTILES)
    corpus = prepared.identity.get("corpus", {})  # set by prepare()
    table = Table(title=f"{corpus.get('corpus')} {corpus.get('source')}->{corpus.get('target')}"
                        f", data cache {prepared.cache_dir.name} ({tok.kind})")
    table.add_column("")
    for s in rows:
        table.add_column(s.name, justify="right")
    figures = {
        "pairs": [f"{s.pairs:,}" for s in rows],
        "distinct sources": [f"{s.sources:,}" for s in rows],
        "references per source, mean (max)": [f"{s.refs_mean:.2f} ({s.refs_max})" for s in rows],
        f"src tokens {pcts}": ["/".join(map(str, s.src_len)) for s in rows],
        f"tgt tokens {pcts}": ["/".join(map(str, s.tgt_len)) for s in rows],
        "<unk> rate src": [f"{s.src_unk:.3%}" for s in rows],
        "<unk> rate tgt": [f"{s.tgt_unk:.3%}" for s in rows],
        "token types used src": [f"{s.src_types:,}" for s in rows],
        "token types used tgt": [f"{s.tgt_types:,}" for s in rows],
        "vocabulary size src": [f"{tok.src_vocab_size:,}" for _ in rows],
        "vocabulary size tgt": [f"{tok.tgt_vocab_size:,}" + (" (joint)" if tok.joint else "")
                                for _ in rows],
    }
    for name, values in figures.items():
        table.add_row(name, *values)
    return table


def cleaning_lines(prepared: Prepared) -> list[str]:
    """What preparing the corpus dropped (each count and its share of the pairs read), what
    each filter removed, and a ``data.max_words`` that keeps 99% of the pairs."""
    from nmt.data.cleaning import counted, suggested_max_words

    meta = prepared.meta
    counts, filtered = meta.get("counts", {}), meta.get("filtered", {})
    read = counts.get("read", 0)
    if not read:
        return []
    max_words = meta.get("data", {}).get("max_words")
    lines = [f"read {read:,} pairs, kept {counted(counts.get('kept', 0), read, 'pairs')}: "
             f"dropped {counted(counts.get('empty', 0), read, 'empty')}, "
             f"{counted(counts.get('too_long', 0), read, f'over data.max_words = {max_words}')}"
             f", {counted(counts.get('filtered', 0), read, 'by data.filters')}, "
             f"{counted(counts.get('duplicates', 0), read, 'duplicates')}"]
    if filtered:
        lines.append("data.filters: " + ", ".join(counted(n, read, name)
                                                  for name, n in filtered.items()))
    for source in meta.get("sources", []):
        if isinstance(source, dict):
            lines.append(f"{source.get('name')}: read {source.get('read', 0):,}, kept "
                         f"{source.get('kept', 0):,}; weight {source.get('weight', 1):g}: "
                         f"{source.get('train_pairs', 0):,} training pairs -> "
                         f"{source.get('train_pairs_weighted', 0):,}")
    longest = {int(k): v for k, v in meta.get("longest", {}).items()
               if str(k).isdigit() and isinstance(v, int)}
    if longest:
        fits = suggested_max_words(longest)
        verdict = "keeps them" if not max_words or max_words >= fits else "cuts into them"
        lines.append(f"99% of the pairs have at most {fits} words on a side: "
                     f"data.max_words = {max_words} {verdict}")
    return lines
