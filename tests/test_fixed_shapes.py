"""``train.pad_to_multiple`` (nmt/data/fixed_shapes.py): batches in a few repeating shapes, with
the same loss and gradients as the unpadded batches, and training that still compiles."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from nmt.config import load_config
from nmt.data.batching import Collator, collate, make_batches
from nmt.data.cache import Split
from nmt.data.fixed_shapes import (
    batch_shapes,
    distinct_shapes,
    fixed_shape_token_batches,
    padded_width,
    padding_share,
)
from nmt.data.tokenizers import PAD_ID
from nmt.models.build import build_model
from nmt.training.loop import train
from nmt.training.step import masked_cross_entropy, training_loss

FAMILY = {"transformer": ["model.d_ff=32", "model.n_heads=2"], "gru": ["model.hidden=16"]}


def random_split(n: int = 400, seed: int = 0, vocab: int = 30) -> Split:
    rng = np.random.default_rng(seed)
    src_len, tgt_len = rng.integers(1, 30, n), rng.integers(1, 30, n)

    def ragged(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        offsets = np.r_[0, np.cumsum(lengths)].astype(np.int64)
        return rng.integers(4, vocab, int(offsets[-1])).astype(np.int32), offsets

    src_ids, src_off = ragged(src_len)
    tgt_ids, tgt_off = ragged(tgt_len)
    empty = [""] * n
    return Split("train", src_ids, src_off, tgt_ids, tgt_off, empty, empty, empty)


def test_padded_width_rounds_up() -> None:
    assert [padded_width(w, 8) for w in (1, 8, 9, 16, 17)] == [8, 8, 16, 16, 24]
    assert padded_width(13, 0) == padded_width(13, 1) == 13


def test_token_batches_hold_one_padded_width_at_the_budget() -> None:
    lengths = np.sort(np.random.default_rng(1).integers(2, 40, 1000))
    order = np.arange(len(lengths))
    batches = fixed_shape_token_batches(order, lengths, budget=400, multiple=8)
    assert np.array_equal(np.concatenate(batches), order)  # every pair once, in order
    for b in batches:
        widths = {padded_width(int(x), 8) for x in lengths[b]}
        assert len(widths) == 1
        width = widths.pop()
        assert len(b) * width <= 400 or len(b) == 1
    # every batch but the last of its width is full: budget // width pairs
    for i, b in enumerate(batches[:-1]):
        width = padded_width(int(lengths[b].max()), 8)
        if padded_width(int(lengths[batches[i + 1]].max()), 8) == width:
            assert len(b) == 400 // width


def test_an_epoch_repeats_few_shapes_and_visits_every_pair_once() -> None:
    split = random_split(2000)
    src, tgt = split.src_lengths(), split.tgt_lengths()
    plain = make_batches(src, tgt, batch_size=600, by="tokens", seed=3)
    fixed = make_batches(src, tgt, batch_size=600, by="tokens", seed=3, pad_to_multiple=8)
    assert sorted(np.concatenate(fixed).tolist()) == list(range(len(tgt)))
    assert distinct_shapes(batch_shapes(src, tgt, fixed, 8)) < distinct_shapes(
        batch_shapes(src, tgt, plain))
    assert padding_share(src, tgt, fixed, 8) > padding_share(src, tgt, plain)
    # the shapes counted from the lengths are the collator's, on both of its paths
    for collator in (Collator(split, pad_to_multiple=8),
                     Collator(split, pad_to_multiple=8, max_entries=0)):
        for b, shape in zip(fixed, batch_shapes(src, tgt, fixed, 8), strict=True):
            batch = collator(b)
            assert (len(batch), batch.src.shape[1], batch.tgt_in.shape[1]) == shape
            assert batch.tgt_out.shape == batch.tgt_in.shape


def test_padded_batches_hold_the_same_tokens() -> None:
    split = random_split()
    indices = np.array([3, 17, 42, 99, 250])
    plain, padded = collate(split, indices), collate(split, indices, pad_to_multiple=16)
    assert padded.src.shape[1] % 16 == 0 and padded.tgt_in.shape[1] % 16 == 0
    assert padded.n_tokens == plain.n_tokens
    assert torch.equal(padded.src_lengths, plain.src_lengths)
    assert torch.equal(padded.tgt_lengths, plain.tgt_lengths)
    for name in ("src", "tgt_in", "tgt_out"):
        a, b = getattr(plain, name), getattr(padded, name)
        assert torch.equal(b[:, :a.shape[1]], a) and bool((b[:, a.shape[1]:] == PAD_ID).all())


@pytest.mark.parametrize("arch", ["transformer", "gru"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_padding_to_a_bucket_changes_neither_loss_nor_gradients(arch: str,
                                                                 smoothing: float) -> None:
    """The masked cross-entropy over the same tokens, unpadded and padded to a multiple of 16,
    through the model (dropout off) and training's loss (the fused CPU path included)."""
    cfg = load_config(None, [f"model.arch={arch}", "model.d_model=16", "model.n_layers=2",
                             "model.dropout=0", *FAMILY[arch]])
    split = random_split(vocab=30)
    indices = np.array([3, 17, 42, 99, 250, 311])
    results = []
    for multiple in (0, 16):
        torch.manual_seed(0)
        model = build_model(cfg.model, 30, 30)
        b = collate(split, indices, pad_to_multiple=multiple)
        logits = model(b.src, b.src_lengths, b.tgt_in)
        objective, nll = training_loss(logits, b.tgt_out, smoothing)
        objective.backward()
        plain_ce = masked_cross_entropy(logits.detach(), b.tgt_out)
        grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
        results.append((float(objective.detach()) / b.n_tokens, float(nll) / b.n_tokens,
                        float(plain_ce) / b.n_tokens, grads))
    (obj0, nll0, ce0, g0), (obj1, nll1, ce1, g1) = results
    assert obj1 == pytest.approx(obj0, rel=1e-5)
    assert nll1 == pytest.approx(nll0, rel=1e-5) and ce1 == pytest.approx(ce0, rel=1e-5)
    assert len(g0) == len(g1)
    for a, b in zip(g0, g1, strict=True):  # sums over other widths round differently
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-4 * float(a.abs().max()))


def test_training_with_buckets_compiles_and_trains_as_without(
        monkeypatch: pytest.MonkeyPatch, tiny_data_dir: Path, tmp_path: Path) -> None:
    """``train.pad_to_multiple`` with ``train.compile`` (TorchDynamo's graphs run eagerly, as in
    tests/test_gpu.py): the run trains, and its losses are the uncompiled run's."""
    from conftest import run_metrics

    real_compile = torch.compile
    compiled: list[Any] = []

    def traced_only(model: torch.nn.Module, **kwargs: Any) -> Any:
        compiled.append(model)
        return real_compile(model, backend="eager", **kwargs)

    monkeypatch.setattr(torch, "compile", traced_only)
    runs = []
    for compile_ in (False, True):
        cfg = load_config(None, [
            "data.tokenizer=word", "data.min_freq=1", "data.valid_frac=0.1",
            "data.test_frac=0.1", "model.d_model=16", "model.n_layers=1", *FAMILY["transformer"],
            "model.dropout=0", "train.batch_size=256", "train.batch_by=tokens",
            "train.pad_to_multiple=8", "train.max_steps=4", "train.eval_every=2",
            "train.eval_sentences=5", "train.log_every=1", "train.device=cpu",
            f"train.compile={str(compile_).lower()}"])
        train(cfg, tmp_path / str(compile_), data_dir=tiny_data_dir, log=lambda s: None)
        runs.append(run_metrics(tmp_path / str(compile_)))
    assert len(compiled) == 1
    plain, with_compile = runs
    assert [r.keys() for r in with_compile] == [r.keys() for r in plain]
    for a, b in zip(with_compile, plain, strict=True):
        for key in ("train_loss", "valid_loss"):
            if a.get(key) is not None:
                assert a[key] == pytest.approx(b[key], rel=1e-5)
