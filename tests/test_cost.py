"""The cost model (nmt/training/cost.py): FLOPs against a count by hand and torch's FLOP counter,
utilisation, and the memory model against what a forward pass really keeps."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from nmt.config import load_config
from nmt.models.build import build_model, count_parameters
from nmt.training.cost import (
    CpuPeak,
    activation_bytes,
    bf16_peak_flops,
    compute_summary,
    count_config_parameters,
    cpu_fp32_peak,
    forward_flops,
    mfu,
    significant,
    training_flops_per_target_token,
    training_memory,
)
from nmt.training.loop import training_loss

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
TINY = {"transformer": ["model.arch=transformer", "model.d_model=8", "model.d_ff=20",
                        "model.n_heads=2", "model.n_layers=2", "model.dropout=0"],
        "gru": ["model.arch=gru", "model.d_model=8", "model.hidden=12", "model.n_layers=2",
                "model.bidirectional=true", "model.dropout=0"]}


def test_transformer_flops_equal_a_count_by_hand() -> None:
    """d_model 8, d_ff 20, 2+2 layers, 30 target words, a pair of 5 source and 7 target
    tokens; every product written out (2 FLOPs a multiply-add)."""
    d, f, n_layers, vocab, s, t = 8, 20, 2, 30, 5, 7
    encoder_layer = (s * 2 * d * 3 * d  # query/key/value projection: (5, 8) @ (8, 24)
                     + 2 * s * s * d  # Q K^T over both heads: 2 x (5, 4) @ (4, 5)
                     + 2 * s * s * d  # weights V: 2 x (5, 5) @ (5, 4)
                     + s * 2 * d * d  # output projection (5, 8) @ (8, 8)
                     + s * 2 * d * f + s * 2 * f * d)  # feed-forward
    decoder_layer = (t * 2 * d * 3 * d + 2 * t * t * d + 2 * t * t * d + t * 2 * d * d  # self
                     + t * 2 * d * d  # cross-attention queries
                     + s * 2 * d * 2 * d  # its keys and values of the encoder output
                     + 2 * t * s * d + 2 * t * s * d + t * 2 * d * d  # cross-attention
                     + t * 2 * d * f + t * 2 * f * d)
    by_hand = n_layers * (encoder_layer + decoder_layer) + t * 2 * d * vocab
    assert by_hand == 44128
    cfg = load_config(None, TINY["transformer"]).model
    assert forward_flops(cfg, vocab, s, t) == by_hand
    assert training_flops_per_target_token(cfg, vocab, s, t) == pytest.approx(3 * by_hand / t)


def test_gru_flops_equal_a_count_by_hand() -> None:
    """Embedding 8, hidden 12, 2 layers, bidirectional encoder, 30 target words, 5 + 7
    tokens. A GRU layer of input i: three gates of (i + h) inputs, 2 x 3h (i + h) a token."""
    e, h, vocab, s, t = 8, 12, 30, 5, 7
    encoder = 2 * (s * 2 * 3 * h * (e + h)  # both directions, first layer
                   + s * 2 * 3 * h * (2 * h + h))  # second layer reads both directions
    decoder = t * 2 * 3 * h * ((h + e) + h) + t * 2 * 3 * h * (h + h)
    attention = (s * 2 * h * h  # keys W_k, once per pair
                 + t * 2 * h * h  # queries W_q
                 + t * s * 2 * h  # scores w_v over every key
                 + t * s * 2 * h)  # context: weights @ values
    by_hand = encoder + decoder + attention + t * 2 * h * vocab
    assert by_hand == 78720
    cfg = load_config(None, TINY["gru"]).model
    assert forward_flops(cfg, vocab, s, t) == by_hand


@pytest.mark.parametrize("arch", ["transformer", "gru"])
@pytest.mark.parametrize(("s", "t"), [(5, 7), (9, 3)])
def test_flops_equal_torch_flop_counter(arch: str, s: int, t: int) -> None:
    """torch counts the products a real forward pass runs (attention through its math path,
    which the counter sees as batched products): the same number."""
    cfg = load_config(None, TINY[arch]).model
    torch.manual_seed(0)
    model = build_model(cfg, 30, 30)
    src, tgt = torch.randint(4, 30, (1, s)), torch.randint(4, 30, (1, t))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(src, torch.tensor([s]), tgt)
    assert counter.get_total_flops() == forward_flops(cfg, 30, s, t)


def test_utilisation_against_known_peaks() -> None:
    assert bf16_peak_flops("NVIDIA H100 80GB HBM3") == 989e12
    assert bf16_peak_flops("NVIDIA H200") == 989e12
    assert bf16_peak_flops("NVIDIA H100 PCIe") == 756e12
    assert mfu(1e6, 98.9e6, "NVIDIA H100 80GB HBM3") == pytest.approx(0.1)
    assert bf16_peak_flops("Tesla T4") is None and mfu(1e6, 1e8, "Tesla T4") is None


def test_parameters_counted_without_building_the_model() -> None:
    cfg = load_config(None, [*TINY["transformer"], "model.tie_embeddings=true"]).model
    model = build_model(cfg, 30, 30, joint_vocab=True)
    assert count_config_parameters(cfg, 30, 30, joint_vocab=True) == count_parameters(model)


def saved_for_backward(model: torch.nn.Module, batch: tuple[torch.Tensor, ...]) -> int:
    """Bytes of every tensor a bf16-autocast forward and loss keep for the backward, each
    storage once, the parameters themselves left out (their bf16 copies are counted)."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    kept: dict[int, int] = {}

    def pack(x: torch.Tensor) -> torch.Tensor:
        storage = x.untyped_storage()
        if storage.data_ptr() not in params:
            kept[storage.data_ptr()] = storage.nbytes()
        return x

    src, src_lengths, tgt_in, tgt_out = batch
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(src, src_lengths, tgt_in)
        training_loss(logits, tgt_out, 0.1)
    return sum(kept.values())


@pytest.mark.parametrize(("arch", "shape"), [
    ("transformer", ["model.d_model=64", "model.d_ff=256", "model.n_heads=8",
                     "model.norm_first=true", "model.tie_embeddings=true"]),
    ("transformer", ["model.d_model=128", "model.d_ff=512", "model.n_heads=4"]),
    ("gru", ["model.d_model=32", "model.hidden=64", "model.bidirectional=true"]),
    ("gru", ["model.d_model=64", "model.hidden=64", "model.tie_embeddings=true"]),
])
def test_activation_model_bounds_what_the_forward_keeps(arch: str, shape: list[str]) -> None:
    """The memory model's activations, saved log-probabilities and bf16 weight copies against
    the bytes a real forward keeps under bf16 autocast: above them, by less than 25%."""
    cfg = load_config(None, [f"model.arch={arch}", "model.n_layers=2", "model.dropout=0.2",
                             *shape]).model
    vocab, b, s, t = 300, 16, 12, 14
    torch.manual_seed(0)
    model = build_model(cfg, vocab, vocab, joint_vocab=True)
    batch = (torch.randint(4, vocab, (b, s)), torch.full((b,), s),
             torch.randint(4, vocab, (b, t)), torch.randint(4, vocab, (b, t)))
    measured = saved_for_backward(model, batch)
    weight_copies = 2 * sum(p.numel() for p in model.parameters() if p.dim() == 2)
    modelled = (activation_bytes(cfg, b * s, b * t, max(s, t)) + 4 * b * t * vocab
                + weight_copies)
    assert measured <= modelled <= 1.25 * measured


@pytest.mark.parametrize("name", ["transformer", "gru"])
def test_gpu_configs_fit_a_80_gb_gpu(name: str) -> None:
    """The configs made for one GPU train within 70% of 80 GB by the memory model, whose
    batches double until they would not: the check can fail."""
    cfg = load_config(CONFIGS / f"{name}.toml")
    assert cfg.train.precision == "auto" and cfg.train.batch_by == "tokens"
    vocab = cfg.data.vocab_size
    estimate = training_memory(cfg, vocab, vocab, joint_vocab=cfg.data.joint_vocab)
    budget = 0.7 * 80e9
    assert estimate.total < budget, f"{name}: {estimate.total / 1e9:.1f} GB"
    huge = training_memory(cfg, vocab, vocab, joint_vocab=cfg.data.joint_vocab,
                           batch_tokens=64 * cfg.train.batch_size)
    assert huge.total > budget


AVX2_CPUINFO = """processor\t: 0
model name\t: AMD EPYC 7B13
cpu MHz\t\t: 2450.000
flags\t\t: fpu sse2 avx fma avx2
processor\t: 1
cpu MHz\t\t: 3000.000
flags\t\t: fpu sse2 avx fma avx2 avx512f
"""


def test_cpu_fp32_peak_from_vector_width_fma_units_and_clock() -> None:
    # the first core decides: AVX2, 8 fp32 lanes, its cpu MHz
    peak = cpu_fp32_peak(2, AVX2_CPUINFO)
    assert peak is not None and (peak.lanes, peak.isa, peak.fma_units) == (8, "AVX2", 2)
    assert peak.flops == pytest.approx(2 * 8 * 2 * 2 * 2450e6)  # 156.8 GFLOP/s
    assert "cpu MHz" in peak.clock_source and "157 GFLOP/s" in peak.describe()
    # cpufreq's maximum (what lscpu shows as CPU max MHz) wins when there is one
    boosted = cpu_fp32_peak(1, AVX2_CPUINFO, max_khz="3500000\n")
    assert boosted is not None and boosted.mhz == 3500 and "max MHz" in boosted.clock_source
    assert cpu_fp32_peak(1, AVX2_CPUINFO, max_khz="unknown") == peak.__class__(
        1, 8, "AVX2", 2, 2450.0, "cpu MHz (/proc/cpuinfo)")
    avx512 = cpu_fp32_peak(4, AVX2_CPUINFO.replace("fma avx2\n", "fma avx2 avx512f\n", 1))
    assert avx512 is not None and avx512.lanes == 16
    assert avx512.flops == pytest.approx(4 * 16 * 2 * 2 * 2450e6)
    # what it cannot say it does not guess: no FMA, no AVX2, no clock, not x86
    assert cpu_fp32_peak(1, AVX2_CPUINFO.replace(" fma", "")) is None
    assert cpu_fp32_peak(1, "flags\t: fpu sse2 avx fma\ncpu MHz\t: 2000\n") is None
    assert cpu_fp32_peak(1, "flags\t: fma avx2\n") is None
    assert cpu_fp32_peak(1, "processor\t: 0\nFeatures\t: fp asimd\nBogoMIPS\t: 50.00\n") is None
    with pytest.raises(ValueError, match="cores=0"):
        cpu_fp32_peak(0, AVX2_CPUINFO)


def test_compute_summary_gives_flops_and_share_of_peak() -> None:
    peak = CpuPeak(1, 8, "AVX2", 2, 1000.0, "test")  # 32 GFLOP/s
    assert compute_summary(7400, 8.5e6, peak) == "62.9 GFLOP/s (197% of this CPU's fp32 peak)"
    assert compute_summary(100, 1e4, peak) == "0.00100 GFLOP/s (0.00313% of this CPU's fp32 peak)"
    assert compute_summary(7400, 8.5e6, None) == "62.9 GFLOP/s"
    assert significant(7412.3) == "7,412" and significant(63.24) == "63.2"
    assert significant(0.0) == "0"
