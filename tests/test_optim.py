"""The optimizer step: the flat-buffer layout trains like separate tensors, clips like
clip_grad_norm_, and checkpoints in the standard per-parameter format."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from nmt.config import ModelConfig, TrainConfig
from nmt.models import build_model
from nmt.optim import TrainOptimizer, clip_grad_norm_flat_

TRAIN = TrainConfig(optimizer="adamw", lr=0.01, weight_decay=0.01)


def tiny_model(arch: str, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    cfg = ModelConfig(arch=arch, d_model=8, hidden=8, n_heads=2, d_ff=16, n_layers=2, dropout=0.0)
    return build_model(cfg, 11, 13)


def batch(step: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(step)
    src = torch.randint(4, 11, (4, 5), generator=g)
    tgt = torch.randint(4, 13, (4, 6), generator=g)
    return src, torch.tensor([5, 4, 3, 1]), tgt


def train_steps(model: nn.Module, opt: TrainOptimizer, steps: range, clip: float) -> list[float]:
    losses = []
    for step in steps:
        src, lengths, tgt = batch(step)
        opt.zero_grad()
        logits = model(src, lengths, tgt[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]) * 3,
                                           tgt[:, 1:].reshape(-1))
        loss.backward()
        opt.step(clip)
        losses.append(float(loss.detach()))
    return losses


@pytest.mark.parametrize("arch", ["transformer", "gru"])
def test_flat_buffer_trains_like_separate_tensors(arch: str) -> None:
    """Same losses and weights either way (clipping active: the norm exceeds 0.5 here)."""
    runs = {}
    for flat in (False, True):
        model = tiny_model(arch)
        opt = TrainOptimizer(TRAIN, list(model.parameters()), flat=flat)
        runs[flat] = (train_steps(model, opt, range(6), clip=0.5), model.state_dict())
    assert runs[True][0] == pytest.approx(runs[False][0], rel=1e-5)
    for name, value in runs[False][1].items():
        torch.testing.assert_close(runs[True][1][name], value, rtol=1e-4, atol=1e-6)
    assert runs[True][1].keys() == runs[False][1].keys()


def test_flat_parameters_are_views_of_the_buffer() -> None:
    model = tiny_model("transformer")
    opt = TrainOptimizer(TRAIN, list(model.parameters()), flat=True)
    assert opt.buffer is not None
    ptr = opt.buffer.untyped_storage().data_ptr()
    assert all(p.untyped_storage().data_ptr() == ptr for p in model.parameters())
    assert opt.buffer.numel() == sum(p.numel() for p in model.parameters())
    train_steps(model, opt, range(1), clip=0.0)
    assert all(p.grad is None for p in model.parameters())  # handed over to the flat gradient


def test_flat_clipping_matches_clip_grad_norm() -> None:
    torch.manual_seed(1)
    grads = [torch.randn(3, 4), torch.randn(7), torch.randn(2, 2, 2)]
    params = [nn.Parameter(torch.zeros_like(g)) for g in grads]
    for p, g in zip(params, grads, strict=True):
        p.grad = g.clone()
    expected_norm = torch.nn.utils.clip_grad_norm_(params, 1.0)
    flat = torch.cat([g.reshape(-1) for g in grads])
    norm = clip_grad_norm_flat_(flat, 1.0)
    torch.testing.assert_close(norm, expected_norm)
    torch.testing.assert_close(flat, torch.cat([p.grad.reshape(-1) for p in params]))
    assert float(torch.linalg.vector_norm(flat)) == pytest.approx(1.0, rel=1e-5)
    small = torch.full((4,), 0.1)
    clip_grad_norm_flat_(small, 1.0)  # below the bound: unchanged
    torch.testing.assert_close(small, torch.full((4,), 0.1))


@pytest.mark.parametrize("saved_flat", [False, True])
@pytest.mark.parametrize("loaded_flat", [False, True])
def test_state_dict_is_per_parameter_and_resumes_either_layout(
    saved_flat: bool, loaded_flat: bool
) -> None:
    """A checkpoint's optimizer state is torch's per-parameter format whatever the layout, and
    training resumed from it (in either layout) continues as the uninterrupted run."""
    model = tiny_model("transformer")
    opt = TrainOptimizer(TRAIN, list(model.parameters()), flat=True)
    whole = train_steps(model, opt, range(8), clip=1.0)

    model = tiny_model("transformer")
    opt = TrainOptimizer(TRAIN, list(model.parameters()), flat=saved_flat)
    train_steps(model, opt, range(4), clip=1.0)
    saved = {"model": model.state_dict(), "optimizer": opt.state_dict()}

    reference = torch.optim.AdamW(tiny_model("transformer").parameters())
    reference.zero_grad()
    for p in reference.param_groups[0]["params"]:
        p.grad = torch.ones_like(p)
    reference.step()
    ref_sd = reference.state_dict()
    state = saved["optimizer"]["state"]
    assert saved["optimizer"]["param_groups"][0]["params"] == ref_sd["param_groups"][0]["params"]
    assert state.keys() == ref_sd["state"].keys()
    for i, s in state.items():
        assert {k: v.shape for k, v in s.items()} == {
            k: v.shape for k, v in ref_sd["state"][i].items()}
        assert float(s["step"]) == 4

    model = tiny_model("transformer", seed=5)  # other weights: all must come from the checkpoint
    opt = TrainOptimizer(TRAIN, list(model.parameters()), flat=loaded_flat)
    model.load_state_dict(saved["model"])
    opt.load_state_dict(saved["optimizer"])
    resumed = train_steps(model, opt, range(4, 8), clip=1.0)
    assert resumed == pytest.approx(whole[4:], rel=1e-5)


def stepped(shapes: list[tuple[int, ...]], flat: bool) -> TrainOptimizer:
    params = [nn.Parameter(torch.zeros(shape)) for shape in shapes]
    opt = TrainOptimizer(TRAIN, params, flat=flat)
    for p in params:
        p.grad = torch.ones_like(p)
    opt.step(0.0)
    return opt


def test_a_state_for_other_parameters_is_refused() -> None:
    opt = stepped([(3,), (2, 2)], flat=True)
    with pytest.raises(ValueError, match="state for 1 parameters, the model has 2"):
        opt.load_state_dict(stepped([(7,)], flat=False).state_dict())
    with pytest.raises(ValueError, match=r"shape \(2, 3\), the parameter has \(2, 2\)"):
        opt.load_state_dict(stepped([(3,), (2, 3)], flat=False).state_dict())
    opt.load_state_dict(stepped([(3,), (2, 2)], flat=False).state_dict())  # the right shapes
