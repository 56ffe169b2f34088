"""What training a model costs: FLOPs per target token, the share of a GPU's peak they reach
(model-FLOPs utilisation), and the peak memory a training step needs.

**FLOPs** (:func:`forward_flops`, :func:`training_flops_per_target_token`). Only matrix
products are counted, 2 FLOPs per multiply-add (``2 m n k`` for an ``(m, k) @ (k, n)``
product); embeddings (lookups), biases, norms, activations, softmax and dropout are left out,
as they are in the usual model-FLOPs figures (they are a few percent of the products here).
One sentence pair of ``S`` source and ``T`` target tokens (``<eos>`` included) costs:

- Transformer (``d`` = d_model, ``f`` = d_ff, ``L`` layers of each stack, ``V`` target
  vocabulary): per encoder layer ``S (6d² + 2d² + 4df)`` for the query/key/value and output
  projections and the feed-forward, plus ``4 S² d`` for ``Q Kᵀ`` and ``weights · V`` over all
  heads; per decoder layer ``T (6d² + 2d² + 2d² + 2d² + 4df)`` (self-attention projections,
  the cross-attention's query and output projections, feed-forward), ``4 S d²`` for the
  cross-attention keys and values of the encoder output, ``4 T² d`` for causal
  self-attention (counted whole: the masked half is computed, as the explicit formula does)
  and ``4 T S d`` for cross-attention; the output layer ``2 T d V``.
- GRU (``e`` = d_model, ``h`` = hidden, ``L`` layers): a GRU layer with input size ``i`` costs
  ``6 h (i + h)`` per token (three gates, input and recurrent products); the encoder runs
  ``L`` layers over ``S`` tokens in each direction (its upper layers take ``2h`` inputs when
  bidirectional), the decoder ``L`` layers over ``T`` tokens (the first takes the context and
  the embedding, ``h + e``). Bahdanau attention: ``2 S h²`` for the keys once per pair,
  ``2 T h²`` for the queries, ``2 T S h`` for the scores (``w_v``) and ``2 T S h`` for the
  context; the output layer ``2 T h V``.

Training is counted as 3x the forward (the backward takes two products for each forward one:
the gradients of the input and of the weight). FLOPs per target token divide a pair's count
by ``T``; given mean lengths, the quadratic attention terms use the mean's square (a slight
undercount for lengths that vary). Padding is not counted: it is work the hardware does but
the model does not need, so utilisation is measured on the tokens that matter.
``tests/test_cost.py`` checks these counts against a count by hand and against
``torch.utils.flop_counter`` on real models.

**Utilisation** (:func:`mfu`): achieved FLOP/s over the GPU's dense bf16 peak from its data
sheet (:data:`BF16_PEAK_TFLOPS`); an unknown GPU gets None, not a guess. On the CPU
(:func:`cpu_fp32_peak`), the fp32 peak is worked out from the processor itself: cores used x
fp32 lanes of its widest vector unit x FMA units per core x 2 FLOPs per fused multiply-add x
clock (see that function for where each figure comes from).

**Memory** (:func:`training_memory`): see its docstring.

Long for a reason: the FLOP count, the peaks it is compared with and the memory model share one
count of the model's matrices.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import torch

from nmt.config import Config, ModelConfig, families

# --- FLOPs -------------------------------------------------------------------------------------


def forward_flops(cfg: ModelConfig, tgt_vocab: int, src_len: float, tgt_len: float) -> float:
    """Matrix-product FLOPs of one forward pass over a pair of ``src_len`` source and
    ``tgt_len`` target tokens (see the module docstring for what is counted)."""
    s, t, n = float(src_len), float(tgt_len), cfg.n_layers
    if cfg.arch == "transformer":
        d, f = cfg.d_model, cfg.d_ff
        encoder = n * (s * (6 * d * d + 2 * d * d + 4 * d * f) + 4 * s * s * d)
        decoder = n * (t * (12 * d * d + 4 * d * f) + 4 * s * d * d
                       + 4 * t * t * d + 4 * t * s * d)
        return encoder + decoder + 2 * t * d * tgt_vocab
    if cfg.arch == "gru":
        e, h = cfg.d_model, cfg.hidden
        directions = 2 if cfg.bidirectional else 1

        def gru(tokens: float, first_input: int, upper_input: int) -> float:
            return sum(tokens * 6 * h * ((first_input if layer == 0 else upper_input) + h)
                       for layer in range(n))

        encoder = directions * gru(s, e, directions * h)
        decoder = gru(t, h + e, h)
        attention = 2 * s * h * h + 2 * t * h * h + 4 * t * s * h
        return encoder + decoder + attention + 2 * t * h * tgt_vocab
    family = families().get(cfg.arch)
    if family is not None and family.forward_flops is not None:
        return family.forward_flops(cfg, tgt_vocab, src_len, tgt_len)
    raise ValueError(f"model.arch={cfg.arch!r}: no FLOP count for this family")


def training_flops_per_target_token(cfg: ModelConfig, tgt_vocab: int, src_len: float,
                                    tgt_len: float) -> float:
    """FLOPs of training (forward and backward, 3x the forward) per target token, for pairs
    of mean lengths ``src_len`` and ``tgt_len`` (``<eos>`` included)."""
    if tgt_len <= 0:
        raise ValueError(f"tgt_len={tgt_len}: expected > 0")
    return 3.0 * forward_flops(cfg, tgt_vocab, src_len, tgt_len) / tgt_len


# Dense (no sparsity) bf16 tensor-core peaks from NVIDIA's data sheets, in TFLOP/s, by a part
# of the name torch.cuda.get_device_name() gives; the first that matches is taken.
BF16_PEAK_TFLOPS: tuple[tuple[str, float], ...] = (
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.0),  # SXM ("NVIDIA H100 80GB HBM3")
    ("H200", 989.0),
    ("GH200", 989.0),
    ("A100", 312.0),
    ("L40S", 362.0),
    ("A10G", 70.0),
    ("L4", 121.0),
)


def bf16_peak_flops(device_name: str) -> float | None:
    """The dense bf16 peak in FLOP/s of the GPU called ``device_name``, or None when it is not
    in :data:`BF16_PEAK_TFLOPS`."""
    for part, tflops in BF16_PEAK_TFLOPS:
        if part.lower() in device_name.lower():
            return tflops * 1e12
    return None


def mfu(tokens_per_sec: float, flops_per_token: float, device_name: str) -> float | None:
    """Model-FLOPs utilisation: achieved FLOP/s over the GPU's dense bf16 peak (0-1), or None
    for a GPU whose peak is not known."""
    peak = bf16_peak_flops(device_name)
    return None if peak is None else tokens_per_sec * flops_per_token / peak


# fp32 lanes of one vector register by the widest instruction set /proc/cpuinfo lists (with FMA):
# the first flag present decides.
VECTOR_LANES: tuple[tuple[str, int, str], ...] = (("avx512f", 16, "AVX-512"), ("avx2", 8, "AVX2"))
# Fused multiply-add units per core: two on every recent x86 core (Intel since Haswell, AMD since
# Zen 2) for AVX2; some AVX-512 parts (Xeon Bronze/Silver, client Ice Lake) have one 512-bit
# unit, so the peak is an upper bound there. An assumption, not read from the processor.
FMA_UNITS = 2


@dataclass(frozen=True)
class CpuPeak:
    """A CPU's fp32 peak: ``cores x lanes x fma_units x 2 x mhz`` FLOP/s, and where each
    figure came from."""

    cores: int
    lanes: int
    isa: str  # "AVX2", "AVX-512"
    fma_units: int
    mhz: float
    clock_source: str  # "max MHz (cpufreq)" or "cpu MHz (/proc/cpuinfo)"

    @property
    def flops(self) -> float:
        return self.cores * self.lanes * self.fma_units * 2 * self.mhz * 1e6

    def describe(self) -> str:
        """How the peak was reached, for a table's notes."""
        return (f"{self.flops / 1e9:,.0f} GFLOP/s = {self.cores} core(s) x {self.lanes} fp32 "
                f"lanes ({self.isa}) x {self.fma_units} FMA units (assumed) x 2 FLOPs x "
                f"{self.mhz:,.0f} MHz ({self.clock_source})")


def cpu_fp32_peak(cores: int, cpuinfo: str, max_khz: str | None = None) -> CpuPeak | None:
    """The fp32 peak of ``cores`` cores of the CPU ``cpuinfo`` (the text of /proc/cpuinfo)
    describes, or None when it cannot say (no AVX2/AVX-512 with FMA listed, no clock).

    The clock is ``max_khz`` when given (the text of cpufreq's ``cpuinfo_max_freq``, what
    ``lscpu`` shows as "CPU max MHz": the single-core boost, so the peak is an upper bound),
    else the first core's ``cpu MHz`` line (its clock when read; a virtual machine shows the
    nominal one). Turbo and AVX-512 clock offsets are not modelled.
    """
    if cores < 1:
        raise ValueError(f"cores={cores}: expected >= 1")
    flags: set[str] = set()
    mhz: float | None = None
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "flags" and not flags:
            flags = set(value.split())
        elif key == "cpu MHz" and mhz is None:
            try:
                mhz = float(value)
            except ValueError:
                pass
    source = "cpu MHz (/proc/cpuinfo)"
    if max_khz is not None:
        try:
            mhz, source = int(max_khz.strip()) / 1000, "max MHz (cpufreq)"
        except ValueError:
            pass
    if mhz is None or mhz <= 0 or "fma" not in flags:
        return None
    for flag, lanes, isa in VECTOR_LANES:
        if flag in flags:
            return CpuPeak(cores, lanes, isa, FMA_UNITS, mhz, source)
    return None


def this_cpu_fp32_peak(threads: int) -> CpuPeak | None:
    """:func:`cpu_fp32_peak` of this machine for ``threads`` compute threads (torch's), at most
    one per logical CPU; None off Linux or when the CPU cannot say."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            cpuinfo = f.read()
    except OSError:
        return None
    try:
        with open("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", encoding="ascii") as f:
            max_khz: str | None = f.read()
    except OSError:
        max_khz = None
    return cpu_fp32_peak(max(1, min(threads, os.cpu_count() or 1)), cpuinfo, max_khz)


def compute_summary(tokens_per_sec: float, flops_per_token: float,
                    peak: CpuPeak | None) -> str:
    """Achieved GFLOP/s of training at ``tokens_per_sec``, and its share of ``peak`` when
    known: ``63 GFLOP/s (40% of this CPU's fp32 peak)``."""
    achieved = tokens_per_sec * flops_per_token
    text = f"{significant(achieved / 1e9)} GFLOP/s"
    if peak is None:
        return text
    return f"{text} ({significant(100 * achieved / peak.flops)}% of this CPU's fp32 peak)"


def significant(value: float, digits: int = 3) -> str:
    """``value`` with at least ``digits`` significant digits and no exponent (``63.2``,
    ``0.0121``, ``7,412``): figures small and large stay readable."""
    if value <= 0 or not math.isfinite(value):
        return f"{value:g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(value)))
    return f"{value:,.{decimals}f}"


# --- memory ------------------------------------------------------------------------------------

# Bytes per value: autocast runs the matrix products in bf16 (their saved inputs and outputs
# are bf16); the residual stream, norms, softmax and the loss stay fp32; dropout keeps a
# one-byte mask.
BF16, FP32, MASK = 2, 4, 1
# Room for what the model leaves out: the caching allocator's fragmentation, the gradients of
# the activations while the backward runs, cuBLAS/cuDNN workspaces.
HEADROOM = 1.25
# A batch's padded source tokens per padded target token, at most: English sources are shorter
# than their French targets on this corpus (0.9 on average), and a batch holds pairs of equal
# target length, so 1.5 bounds the source padding of the worst batch with room to spare.
SOURCE_PER_TARGET = 1.5
# Subword tokens per word, at most, for the longest padded sequence (data.max_words words).
TOKENS_PER_WORD = 2


@dataclass(frozen=True)
class MemoryEstimate:
    """Peak memory of one training step, in bytes, by what holds it."""

    parameters: int  # trainable parameters (tied weights once)
    weights: float  # parameters, gradients, Adam's two moments, the moving average, bf16 copies
    activations: float  # what the forward keeps for the backward, both stacks
    logits: float  # the output layer's logits, their fp32 log-probabilities and gradients
    headroom: float = HEADROOM

    @property
    def total(self) -> float:
        return self.weights + self.headroom * (self.activations + self.logits)


def count_config_parameters(cfg: ModelConfig, src_vocab: int, tgt_vocab: int, *,
                            joint_vocab: bool) -> int:
    """The trainable parameters of ``cfg``'s model, from a copy built on the meta device (no
    memory is allocated and nothing is initialised)."""
    from nmt.models.build import build_model, count_parameters

    with torch.device("meta"):
        model = build_model(cfg, src_vocab, tgt_vocab, joint_vocab=joint_vocab)
    return count_parameters(model)


def activation_bytes(cfg: ModelConfig, src_tokens: float, tgt_tokens: float,
                     max_len: float) -> float:
    """Bytes the forward keeps for the backward over a batch of ``src_tokens`` and
    ``tgt_tokens`` padded tokens whose longest sequence has ``max_len`` tokens, under bf16
    autocast, up to the output layer's input (its logits: :func:`logit_bytes`).

    Counted per token and layer from what each operation keeps on the unfused path, the
    CPU's (``tests/test_cost.py`` measures it): the fp32 inputs of norms, the bf16 inputs of
    matrix products, dropout masks in their input's dtype, attention computed in fp32 with its
    weights, their dropout mask and the dropped weights kept (``12`` bytes per head, query and
    key), a GRU cell's gates and states. CUDA keeps less (fused attention keeps no weights,
    dropout masks are one byte), so this bounds it from above.
    """
    n = cfg.n_layers
    if cfg.arch == "transformer":
        d, f, h = cfg.d_model, cfg.d_ff, cfg.n_heads
        weights = 3 * FP32 * h  # per query and key
        # two norms' inputs (fp32), the qkv, output and FFN inputs (bf16), q/k/v (fp32), the
        # ReLU output, two dropout masks (bf16)
        block = 2 * FP32 * d + 3 * BF16 * d + 3 * FP32 * d + BF16 * f + 2 * BF16 * d
        # cross-attention: a norm's input, the query and output projections' inputs, q,
        # a dropout mask; its keys and values (fp32) and their input (bf16) per source token
        cross = FP32 * d + 2 * BF16 * d + FP32 * d + BF16 * d
        encoder = src_tokens * (block + weights * max_len)
        decoder = (tgt_tokens * (block + cross + 2 * weights * max_len)
                   + src_tokens * (2 * FP32 + BF16) * d)
        # embedding dropout masks (fp32) and token ids; final norms; the output layer's input
        ends = (src_tokens + tgt_tokens) * (2 * FP32 * d + 8) + tgt_tokens * BF16 * d
        return n * (encoder + decoder) + ends
    if cfg.arch == "gru":
        e, hid = cfg.d_model, cfg.hidden
        directions = 2 if cfg.bidirectional else 1

        def gru(first_input: int, upper_input: int) -> float:
            """Per token: the cell's gates and states (18 h bytes) and the layer's input in
            fp32 and bf16, every layer."""
            return sum(18 * hid + (FP32 + BF16) * (first_input if layer == 0 else upper_input)
                       for layer in range(n))

        encoder = src_tokens * directions * gru(e, directions * hid)
        decoder = tgt_tokens * gru(hid + e, hid)
        # Bahdanau attention per target step: tanh(W_q q + keys) and the values' bf16 copy
        # over every source position, the scores, mask and weights, the query's input; the
        # keys and their input once per source token
        attention = (tgt_tokens * (max_len * (2 * BF16 * hid + 4 * BF16) + BF16 * hid)
                     + src_tokens * 2 * BF16 * hid)
        ends = (src_tokens + tgt_tokens) * (FP32 * e + 8) + tgt_tokens * BF16 * hid
        return encoder + decoder + attention + ends
    raise ValueError(f"model.arch={cfg.arch!r}: no memory model for this family")


def logit_bytes(tgt_tokens: float, tgt_vocab: int) -> float:
    """The output layer at its worst moment, the backward of the loss: bf16 logits, fp32
    log-probabilities (saved), the fp32 gradient of the log-probabilities and of the logits,
    and its bf16 copy; 16 bytes per target token and vocabulary entry."""
    return tgt_tokens * tgt_vocab * (BF16 + FP32 + FP32 + FP32 + BF16)


def training_memory(cfg: Config, src_vocab: int, tgt_vocab: int, *, joint_vocab: bool,
                    batch_tokens: float | None = None) -> MemoryEstimate:
    """Peak memory of a training step of ``cfg`` with bf16 autocast, as a model, not a
    measurement: made to be above what a step takes, so that a config it says fits does fit.

    - Weights: 4 bytes each for the fp32 parameters, their gradients and Adam's two moments,
      4 more for the moving average (``train.ema_decay``) and 2 for autocast's bf16 copies.
    - Activations (:func:`activation_bytes`) for a batch of ``batch_tokens`` padded target
      tokens (default: ``train.batch_size`` when batching by tokens; by sentences, the
      sentences times the longest sequence), :data:`SOURCE_PER_TARGET` as many source tokens,
      and sequences of up to ``data.max_words`` x :data:`TOKENS_PER_WORD` tokens (or
      ``data.truncate``) for the attention weights.
    - Logits (:func:`logit_bytes`).
    - Activations and logits times :data:`HEADROOM` for what is not modelled.
    ``train.accum_steps`` does not change the peak: each batch's activations are freed by its
    backward. Decoding during validation needs far less than a training step and is left out.
    """
    m, t, d = cfg.model, cfg.train, cfg.data
    max_len = float(d.truncate or (d.max_words or 100) * TOKENS_PER_WORD)
    if batch_tokens is None:
        batch_tokens = float(t.batch_size if t.batch_by == "tokens" else t.batch_size * max_len)
    params = count_config_parameters(m, src_vocab, tgt_vocab, joint_vocab=joint_vocab)
    per_parameter = 4 * FP32 + (FP32 if t.ema_decay else 0) + BF16
    return MemoryEstimate(
        parameters=params, weights=float(params * per_parameter),
        activations=activation_bytes(m, SOURCE_PER_TARGET * batch_tokens, batch_tokens,
                                     max_len),
        logits=logit_bytes(batch_tokens, tgt_vocab))


__all__ = ["BF16_PEAK_TFLOPS", "CpuPeak", "MemoryEstimate", "activation_bytes",
           "bf16_peak_flops", "compute_summary", "count_config_parameters", "cpu_fp32_peak",
           "forward_flops", "logit_bytes", "mfu", "significant", "this_cpu_fp32_peak",
           "training_flops_per_target_token", "training_memory"]
