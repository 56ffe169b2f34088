"""Batching: padded tensors match the sequences; batches cover an epoch, respect budgets, shard."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from nmt.data.batching import Collator, collate, make_batches
from nmt.data.cache import Split
from nmt.data.tokenizers import BOS_ID, EOS_ID, PAD_ID


def make_split(src: list[list[int]], tgt: list[list[int]]) -> Split:
    def flat(seqs: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        offsets = np.concatenate([[0], np.cumsum([len(s) for s in seqs])]).astype(np.int64)
        ids = np.array([t for s in seqs for t in s], dtype=np.int32)
        return ids, offsets

    (si, so), (ti, to) = flat(src), flat(tgt)
    return Split("train", si, so, ti, to, ["s"] * len(src), ["t"] * len(tgt),
                 ["t"] * len(tgt))


SEQS = st.lists(st.integers(4, 50), max_size=12)


def test_collate_golden() -> None:
    split = make_split([[10, 11, 12], [13]], [[20], [21, 22, 23, 24]])
    b = collate(split, np.array([0, 1]))
    assert b.src.tolist() == [[10, 11, 12, EOS_ID], [13, EOS_ID, PAD_ID, PAD_ID]]
    assert b.tgt_in.tolist() == [[BOS_ID, 20, PAD_ID, PAD_ID, PAD_ID], [BOS_ID, 21, 22, 23, 24]]
    assert b.tgt_out.tolist() == [[20, EOS_ID, PAD_ID, PAD_ID, PAD_ID], [21, 22, 23, 24, EOS_ID]]
    assert b.src_lengths.tolist() == [4, 2] and b.tgt_lengths.tolist() == [2, 5]
    assert b.n_tokens == 7 and b.src.dtype == torch.long
    # like the recipe, <eos> is added before cutting, so a long sentence loses it
    t = collate(split, np.array([1, 0]), truncate=3)
    assert t.tgt_out.tolist() == [[21, 22, 23], [20, EOS_ID, PAD_ID]]
    assert t.tgt_in.tolist() == [[BOS_ID, 21, 22], [BOS_ID, 20, PAD_ID]]
    assert t.src.tolist() == [[13, EOS_ID, PAD_ID], [10, 11, 12]]
    assert t.tgt_lengths.tolist() == [3, 2] and t.src_lengths.tolist() == [2, 3]
    assert b.to("cpu").src.equal(b.src) and len(b) == 2


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(SEQS, SEQS), min_size=1, max_size=20), st.integers(0, 8))
def test_collate_matches_sequences(pairs: list[tuple[list[int], list[int]]], truncate: int) -> None:
    split = make_split([p[0] for p in pairs], [p[1] for p in pairs])
    indices = np.arange(len(pairs))
    np.random.default_rng(len(pairs)).shuffle(indices)
    b = collate(split, indices, truncate=truncate)
    cut = (lambda x: x[:truncate]) if truncate else (lambda x: x)
    for row, i in enumerate(indices):
        src, tgt = pairs[i]
        for got, want, n in ((b.src, cut(src + [EOS_ID]), b.src_lengths),
                             (b.tgt_out, cut(tgt + [EOS_ID]), b.tgt_lengths),
                             (b.tgt_in, cut([BOS_ID] + tgt), b.tgt_lengths)):
            assert int(n[row]) == len(want)
            assert got[row, :len(want)].tolist() == want
            assert (got[row, len(want):] == PAD_ID).all()  # padding positions are PAD
    assert b.n_tokens == int(b.tgt_lengths.sum())
    assert b.src.shape[1] == int(b.src_lengths.max()) and b.tgt_in.shape == b.tgt_out.shape


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(SEQS, SEQS), min_size=1, max_size=20), st.integers(0, 8),
       st.integers(0, 2**31 - 1))
def test_collator_equals_collate(pairs: list[tuple[list[int], list[int]]], truncate: int,
                                 seed: int) -> None:
    """Gathering rows of matrices padded once gives collate()'s batches exactly, for any subset
    and order; a split too large for its budget pads per batch."""
    split = make_split([p[0] for p in pairs], [p[1] for p in pairs])
    rng = np.random.default_rng(seed)
    indices = rng.permutation(len(pairs))[: rng.integers(1, len(pairs) + 1)]
    expected = collate(split, indices, truncate=truncate)
    for budget, precomputed in ((1 << 22, True), (1, False)):
        collator = Collator(split, truncate=truncate, max_entries=budget)
        assert (collator._matrices is not None) == precomputed  # the padded matrices' path
        got = collator(indices)
        for name in ("src", "src_lengths", "tgt_in", "tgt_out", "tgt_lengths"):
            assert getattr(got, name).equal(getattr(expected, name)), name
            assert getattr(got, name).dtype == torch.int64
        assert got.n_tokens == expected.n_tokens


def lengths(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(1, 40, n), rng.integers(1, 60, n)


@pytest.mark.parametrize("by", ["sentences", "tokens"])
@pytest.mark.parametrize("shuffle", [True, False])
def test_every_index_exactly_once(by: str, shuffle: bool) -> None:
    src_len, tgt_len = lengths(3000)
    size = 32 if by == "sentences" else 600
    batches = make_batches(src_len, tgt_len, batch_size=size, by=by, shuffle=shuffle, seed=3,
                           epoch=1)
    assert np.array_equal(np.sort(np.concatenate(batches)), np.arange(3000))
    if by == "sentences":
        assert max(map(len, batches)) == size
    else:  # padded target size (with <eos>) within the budget, unless one pair alone exceeds it
        assert all(len(b) * (tgt_len[b].max() + 1) <= size for b in batches)
        assert np.mean([len(b) for b in batches]) > 10  # and the budget is actually used


def test_length_grouping_reduces_padding() -> None:
    src_len, tgt_len = lengths(5000)

    def padding(batches: list[np.ndarray]) -> int:
        return sum(len(b) * tgt_len[b].max() - tgt_len[b].sum() for b in batches)
    bucketed = make_batches(src_len, tgt_len, batch_size=64, shuffle=True, seed=1, epoch=0)
    rng = np.random.default_rng(0)
    plain = np.array_split(rng.permutation(5000), range(64, 5000, 64))
    assert padding(bucketed) < padding(plain) / 4


@pytest.mark.parametrize("multiple", [0, 8])
def test_batches_are_alike_on_both_sides(multiple: int) -> None:
    """A batch is as wide as its longest source and its longest target: pairs whose targets
    are alike but whose sources are not (a target length shared by sources of 1 to 60 tokens)
    must not share a batch, or most source positions are padding."""
    rng = np.random.default_rng(3)
    tgt_len = rng.integers(4, 12, 6000)
    src_len = rng.integers(1, 61, 6000)

    def source_padding(batches: list[np.ndarray]) -> float:
        return 1 - sum(int(src_len[b].sum()) for b in batches) / sum(
            len(b) * int(src_len[b].max()) for b in batches)
    batches = make_batches(src_len, tgt_len, batch_size=2000, by="tokens", seed=1, epoch=0,
                           pad_to_multiple=multiple)
    assert np.array_equal(np.sort(np.concatenate(batches)), np.arange(6000))
    assert source_padding(batches) < 0.12  # sorted by the target alone: 0.32
    if multiple:  # and still one padded target width a batch
        assert all(len({-(-(int(t) + 1) // multiple) for t in tgt_len[b]}) == 1
                   for b in batches)


def test_deterministic_for_seed_and_epoch() -> None:
    src_len, tgt_len = lengths(1000)

    def run(seed: int, epoch: int) -> list[list[int]]:
        return [b.tolist() for b in make_batches(src_len, tgt_len, batch_size=16, seed=seed,
                                                 epoch=epoch, shuffle=True)]
    assert run(1, 0) == run(1, 0)
    assert run(1, 0) != run(1, 1) and run(1, 0) != run(2, 0)


@pytest.mark.parametrize("by", ["sentences", "tokens"])
def test_rank_shards_are_disjoint_and_equal(by: str) -> None:
    src_len, tgt_len = lengths(1001)
    size = 16 if by == "sentences" else 300
    world = 3
    shards = [make_batches(src_len, tgt_len, batch_size=size, by=by, shuffle=True, seed=5,
                           epoch=2, rank=r, world_size=world) for r in range(world)]
    assert len({len(s) for s in shards}) == 1  # the same number of steps on every rank
    seen = [np.concatenate(s) for s in shards]
    for a in range(world):
        for b in range(a + 1, world):
            assert not set(seen[a].tolist()) & set(seen[b].tolist())
    full = make_batches(src_len, tgt_len, batch_size=size, by=by, shuffle=True, seed=5, epoch=2)
    assert len(shards[0]) == len(full) // world  # only the remainder is dropped


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="by="):
        make_batches(np.ones(3), np.ones(3), batch_size=2, by="words")
    assert make_batches(np.zeros(0), np.zeros(0), batch_size=4) == []


def test_batches_golden() -> None:
    """A fixed seed and epoch give these batches, so a resumed run, or one of the next version,
    sees the same ones."""
    s = np.array([3, 5, 2, 8, 1, 4, 6, 7, 2, 3])
    t = np.array([4, 4, 2, 9, 1, 5, 6, 8, 3, 2])
    assert [b.tolist() for b in make_batches(s, t, batch_size=3, seed=1, epoch=0)] == [
        [8, 0, 1], [3], [5, 6, 7], [4, 2, 9]]
    assert [b.tolist() for b in make_batches(s, t, batch_size=12, by="tokens", seed=7,
                                             epoch=3)] == [[8, 0], [1, 5], [3], [4, 2, 9], [6], [7]]


def test_an_epochs_batches_hold_about_four_bytes_a_pair() -> None:
    """The batches of an epoch are held while it trains: about four bytes a pair (a view each
    into the epoch's order) and a small array header a batch."""
    import tracemalloc

    n = 200_000
    rng = np.random.default_rng(0)
    src, tgt = rng.integers(1, 40, n), rng.integers(1, 40, n)
    tracemalloc.start()
    try:
        batches = make_batches(src, tgt, batch_size=3000, by="tokens", seed=1, epoch=0)
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert sum(map(len, batches)) == n
    assert held < 4 * n + 200 * len(batches), f"{held / n:.1f} bytes a pair"
