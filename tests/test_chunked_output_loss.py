"""nmt/training/chunked_output_loss.py's trick: the output layer and the loss by chunks give
what the output layer followed by the readable loss gives (objective, cross-entropy and the
gradients of the features, the weight and the bias), whatever the shapes, padding, smoothing
and chunk boundaries; and a training step through it is the readable step."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from test_train import tiny_config
from torch import nn

import nmt.training.chunked_output_loss as chunked
import nmt.training.fused_cross_entropy as fused
from nmt.config import load_config
from nmt.data.tokenizers import PAD_ID
from nmt.models.build import build_model
from nmt.runs.checkpoint import load_checkpoint
from nmt.training import step
from nmt.training.loop import train

CPU = torch.device("cpu")


def readable_loss(logits: torch.Tensor, tgt: torch.Tensor,
                  smoothing: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The label-smoothed loss as ``F.cross_entropy`` computes it, and the plain one."""
    flat, targets = logits.reshape(-1, logits.size(-1)), tgt.reshape(-1)
    objective = F.cross_entropy(flat, targets, ignore_index=PAD_ID, reduction="sum",
                                label_smoothing=smoothing)
    nll = F.cross_entropy(flat, targets, ignore_index=PAD_ID, reduction="sum")
    return objective, nll.detach()


def loss_and_grads(layer: nn.Linear, features: torch.Tensor, tgt: torch.Tensor,
                   smoothing: float, scale: float, *, trick: bool
                   ) -> tuple[float, float, list[torch.Tensor]]:
    layer.zero_grad()
    x = features.detach().clone().requires_grad_()
    if trick:
        objective, nll = chunked.training_loss(x, layer, tgt, smoothing)
    else:
        objective, nll = readable_loss(layer(x), tgt, smoothing)
    assert objective.requires_grad and not nll.requires_grad
    (objective * scale).backward()
    grads = [x.grad, layer.weight.grad] + ([] if layer.bias is None else [layer.bias.grad])
    assert all(g is not None for g in grads)
    return float(objective.detach()), float(nll), [g.clone() for g in grads if g is not None]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3), st.sampled_from([1, 7, 170, 513]), st.integers(5, 300),
       st.integers(2, 24), st.booleans(), st.integers(0, 2**31 - 1),
       st.sampled_from([0.0, 0.1, 0.3]), st.floats(1e-4, 10.0))
def test_the_trick_gives_the_layer_and_readable_loss_and_gradients(
        batch: int, length: int, vocab: int, width: int, bias: bool, seed: int,
        smoothing: float, scale: float) -> None:
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    layer = nn.Linear(width, vocab, bias=bias)
    features = torch.randn(batch, length, width, generator=g) * 2
    tgt = torch.randint(0, vocab, (batch, length), generator=g)
    tgt[torch.rand(batch, length, generator=g) < 0.3] = PAD_ID  # padding, anywhere
    got = loss_and_grads(layer, features, tgt, smoothing, scale, trick=True)
    want = loss_and_grads(layer, features, tgt, smoothing, scale, trick=False)
    tokens = max(int((tgt != PAD_ID).sum()), 1)
    assert got[0] == pytest.approx(want[0], rel=1e-5, abs=1e-4 * tokens)
    assert got[1] == pytest.approx(want[1], rel=1e-5, abs=1e-4 * tokens)
    for mine, theirs in zip(got[2], want[2], strict=True):
        assert torch.allclose(mine, theirs, rtol=1e-4, atol=1e-5 * scale * tokens ** 0.5)


def test_chunks_end_where_the_rows_do() -> None:
    """Rows over several chunks, the last one short: each row's loss counted once."""
    layer = nn.Linear(4, 11)
    rows = 2 * chunked.ROWS + 3
    features, tgt = torch.randn(1, rows, 4), torch.randint(4, 11, (1, rows))
    got = loss_and_grads(layer, features, tgt, 0.1, 1.0, trick=True)
    want = loss_and_grads(layer, features, tgt, 0.1, 1.0, trick=False)
    assert got[0] == pytest.approx(want[0], rel=1e-5)
    assert torch.allclose(got[2][0], want[2][0], atol=1e-6)


def test_a_frozen_layer_gets_no_gradient_and_the_features_theirs() -> None:
    layer = nn.Linear(6, 9)
    layer.requires_grad_(False)
    x = torch.randn(2, 5, 6, requires_grad=True)
    objective, _ = chunked.training_loss(x, layer, torch.randint(4, 9, (2, 5)), 0.1)
    objective.backward()
    assert layer.weight.grad is None and layer.bias.grad is None and x.grad is not None


def tiny_model(arch: str) -> nn.Module:
    overrides = {"transformer": ["model.d_model=16", "model.n_heads=2", "model.d_ff=32",
                                 "model.n_layers=2", "model.tie_embeddings=true"],
                 "gru": ["model.arch=gru", "model.d_model=12", "model.hidden=16"]}[arch]
    cfg = load_config(None, [*overrides, "model.dropout=0.0"])
    torch.manual_seed(0)
    return build_model(cfg.model, 37, 37, joint_vocab=True)


@pytest.mark.parametrize("arch", ["transformer", "gru"])
def test_a_model_trained_by_chunks_gets_the_readable_gradients(arch: str) -> None:
    """The features of ``forward(project=False)`` through the trick against the model's logits
    through the readable loss: every parameter's gradient, a tied embedding's included."""
    model = tiny_model(arch)
    layer = chunked.output_layer(model, CPU, None, 1)
    assert layer is model.out
    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, 37, (3, 6), generator=g)
    src_lengths = torch.tensor([6, 4, 2])
    tgt_in = torch.randint(4, 37, (3, 5), generator=g)
    tgt_out = torch.randint(4, 37, (3, 5), generator=g)
    tgt_out[2, 3:] = PAD_ID

    def grads(trick: bool) -> tuple[float, dict[str, torch.Tensor]]:
        model.zero_grad()
        if trick:
            features = model(src, src_lengths, tgt_in, project=False)
            objective, _ = chunked.training_loss(features, model.out, tgt_out, 0.1)
        else:
            objective, _ = readable_loss(model(src, src_lengths, tgt_in), tgt_out, 0.1)
        objective.backward()
        return float(objective.detach()), {n: p.grad.clone() for n, p in model.named_parameters()
                                  if p.grad is not None}

    (loss_a, want), (loss_b, got) = grads(False), grads(True)
    assert loss_b == pytest.approx(loss_a, rel=1e-5)
    assert got.keys() == want.keys() and len(got) == len(list(model.parameters()))
    for name in want:
        assert torch.allclose(got[name], want[name], rtol=1e-4, atol=1e-6), name


def test_the_trick_applies_in_fp32_on_the_cpu_in_one_process_only() -> None:
    model = tiny_model("transformer")
    assert chunked.output_layer(model, CPU, None, 1) is model.out
    assert chunked.output_layer(model, CPU, torch.bfloat16, 1) is None  # fused_cross_entropy's
    assert chunked.output_layer(model, CPU, None, 2) is None
    assert chunked.output_layer(model, torch.device("cuda"), None, 1) is None
    model.separable_output = False  # a family that does not say its output layer is separable
    assert chunked.output_layer(model, CPU, None, 1) is None
    assert fused.applies(torch.zeros(1, 1))  # what runs there instead, on the CPU


@pytest.mark.parametrize("arch", ["transformer", "gru"])
def test_nmt_train_takes_the_trick_and_trains_as_without_it(
        arch: str, tiny_data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three steps of ``nmt train`` in fp32 on the CPU go through the trick, and give the
    weights the same three steps give without it."""
    calls = []
    trick = step.chunked_output_loss.training_loss

    def counted(*args: object, **kwargs: object) -> tuple[torch.Tensor, torch.Tensor]:
        calls.append(1)
        return trick(*args, **kwargs)  # type: ignore[arg-type]

    def weights(name: str) -> dict[str, torch.Tensor]:
        cfg = tiny_config(arch, "train.max_steps=3", "train.eval_every=100",
                          "train.precision=fp32", "model.dropout=0.0", "train.label_smoothing=0.1")
        train(cfg, tmp_path / name, data_dir=tiny_data_dir, log=lambda s: None)
        return load_checkpoint(tmp_path / name / "checkpoints" / "last.pt")["model"]

    monkeypatch.setattr(chunked, "training_loss", counted)
    by_chunks = weights("by-chunks")
    assert len(calls) == 3
    monkeypatch.setattr(chunked, "output_layer", lambda *a: None)
    readable = weights("readable")
    assert len(calls) == 3 and by_chunks.keys() == readable.keys()
    for name, value in readable.items():
        assert torch.allclose(by_chunks[name], value, rtol=1e-4, atol=1e-5), name
