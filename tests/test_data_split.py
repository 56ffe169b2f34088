"""The grouped split: no English sentence in two splits, all references kept, deterministic."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_split import grouped_split

from nmt.data.split import n_held_out


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([f"s{i}" for i in range(40)]), max_size=300),
    st.floats(0, 0.24), st.floats(0, 0.24), st.integers(0, 2**32),
)
def test_no_source_in_two_splits_and_every_pair_once(
    src: list[str], valid_frac: float, test_frac: float, seed: int
) -> None:
    parts = grouped_split(src, valid_frac, test_frac, seed)
    assert sorted(np.concatenate(list(parts.values())).tolist()) == list(range(len(src)))
    sources = {k: {src[i] for i in idx} for k, idx in parts.items()}
    assert not sources["train"] & sources["valid"]
    assert not sources["train"] & sources["test"]
    assert not sources["valid"] & sources["test"]
    # a held-out sentence keeps every one of its pairs (all references)
    for k in ("valid", "test"):
        assert len(parts[k]) == sum(s in sources[k] for s in src)
    n = len(set(src))
    assert len(sources["valid"]) == n_held_out(n, valid_frac)
    assert len(sources["test"]) == n_held_out(n, test_frac)


def test_deterministic_for_a_seed_and_sized_by_fraction() -> None:
    src = [f"sentence {i % 1000}" for i in range(2500)]  # 1000 sources, 2-3 references each
    a, b = grouped_split(src, 0.02, 0.03, 7), grouped_split(src, 0.02, 0.03, 7)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert len({src[i] for i in a["valid"]}) == 20 and len({src[i] for i in a["test"]}) == 30
    c = grouped_split(src, 0.02, 0.03, 8)
    assert not np.array_equal(a["test"], c["test"])
    none = grouped_split(src, 0.0, 0.0, 7)  # the d2l preset: everything trains
    assert len(none["train"]) == 2500 and len(none["valid"]) == len(none["test"]) == 0


def test_small_corpora_still_hold_out_but_keep_training_data() -> None:
    assert n_held_out(10, 0.01) == 1  # rounds to 0, but a positive fraction asks for some
    assert n_held_out(2, 0.4) == 0 and n_held_out(5, 0.49) == 2
    assert n_held_out(1000, 0.0) == 0


@settings(max_examples=100, deadline=None)
@given(st.integers(3, 400), st.floats(0.01, 0.24), st.integers(0, 50), st.integers(0, 2**32))
def test_held_out_sizes_are_capped_by_count(n: int, frac: float, cap: int, seed: int) -> None:
    """data.valid_size / test_size cap the held-out source sentences (0: no cap); the split
    stays grouped and the fraction still rules below the cap."""
    src = [f"s{i % n}" for i in range(2 * n)]  # every sentence twice: two references
    parts = grouped_split(src, frac, frac, seed, valid_size=cap, test_size=cap)
    for k in ("valid", "test"):
        sentences = {src[i] for i in parts[k]}
        assert len(sentences) == n_held_out(n, frac, cap)
        assert len(parts[k]) == 2 * len(sentences)  # both references held out
        if cap:
            assert len(sentences) <= max(cap, 1)
    uncapped = grouped_split(src, frac, frac, seed)
    if not cap or cap >= round(frac * n):
        assert all(np.array_equal(parts[k], uncapped[k]) for k in parts)
