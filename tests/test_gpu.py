"""The GPU path. What the CPU can prove is proven here on every machine: the mixed-precision
code path under bf16 autocast, and ``train.compile``. What needs CUDA is marked ``gpu`` and runs
where a CUDA device is visible (``make gpu-check STEP=tests``), skipped with the reason
elsewhere: bf16 autocast and the fused optimizer on the GPU, the key/value cache, batched
decoding = one sentence at a time, checkpoints moved between the GPU and the CPU."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest
import torch
from conftest import run_metrics, step_by_step_logits
from test_decode import TEXTS, src_ids, trained_toy
from test_train import tiny_config
from torch._inductor.runtime.cache_dir_utils import default_cache_dir

import nmt.device
from nmt.config import Config, DecodeConfig
from nmt.data.batching import Collator
from nmt.data.prepare import prepare
from nmt.models.build import build_model
from nmt.runs.directory import MetricsLog
from nmt.runs.loading import load_run
from nmt.training import chunked_output_loss
from nmt.training.distributed import Dist
from nmt.training.loop import Display, Progress, Run, TrainingState, train, train_step
from nmt.training.optim import build_optimizer
from nmt.translation.limits import output_limit
from nmt.translation.search import beam_search, greedy, pad_batch, search_ids

ARCHS = ("transformer", "gru")
BF16 = Callable[[str | None], None]  # the cpu_bf16 fixture (conftest.py)
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs a CUDA device, and none is visible")


@pytest.fixture(autouse=True)
def fp32_without_tf32() -> Any:
    """The invariants below (cached = full pass, batched = one by one, GPU = CPU) hold in fp32
    to 1e-4. PyTorch lets cuDNN's RNNs use TF32 (a 10-bit mantissa) by default on Ampere and
    later GPUs (``torch.backends.cudnn.allow_tf32``), and cuDNN rounds the GRU's sequence and
    its single steps differently then: 1e-3 apart on an H200, which is TF32, not a cache bug.
    So these tests compute in fp32 proper, and put PyTorch's settings back after."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def one_step(cfg: Config, data_dir: Path, device: torch.device) -> tuple[float, torch.dtype]:
    """One optimizer step of a freshly seeded model of ``cfg`` on a fixed batch of the tiny
    corpus: the step's summed cross-entropy and the dtype the output layer computed in."""
    prepared = prepare(cfg.data, data_dir, log=lambda s: None)
    tok = prepared.tokenizer
    run = Run(cfg, data_dir, Dist(), device, prepared, MetricsLog(data_dir, enabled=False), {},
              Display(), elapsed0=0.0)
    torch.manual_seed(0)
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size,
                        joint_vocab=tok.joint).to(device)
    optimizer, scheduler = build_optimizer(cfg.train, model)
    state = TrainingState(model, optimizer, scheduler, None, Progress())
    dtypes = []
    model.out.register_forward_hook(lambda m, i, out: dtypes.append(out.dtype))
    by_chunks = chunked_output_loss.training_loss

    def layer_in_the_loss(features: torch.Tensor, *rest: Any) -> Any:
        dtypes.append(features.dtype)  # fp32 on the CPU: the loss applies the layer there
        return by_chunks(features, *rest)

    with mock.patch.object(chunked_output_loss, "training_loss", layer_in_the_loss):
        _, loss, _ = train_step(model, state, [np.arange(0, 24)],
                                Collator(prepared.splits["train"], truncate=0), run)
    return loss, dtypes[0]


def train_losses(cfg: Config, run: Path, data_dir: Path) -> list[float]:
    """Train ``cfg`` into ``run``; the logged train losses."""
    train(cfg, run, data_dir=data_dir, log=lambda s: None)
    return [r["train_loss"] for r in run_metrics(run) if "train_loss" in r]


def assert_bf16_trains_like_fp32(arch: str, device: str, data_dir: Path, tmp_path: Path) -> None:
    """bf16 autocast: the output layer computes in bf16, one step's loss is within 1% of
    fp32's, and three epochs learn (the loss falls by a third) to within 5% of fp32's."""
    def config(precision: str, *extra: str) -> Config:
        return tiny_config(arch, "model.dropout=0", f"train.device={device}",
                           f"train.precision={precision}", *extra)

    (loss32, dtype32), (loss16, dtype16) = (one_step(config(p), data_dir, torch.device(device))
                                            for p in ("fp32", "bf16"))
    assert (dtype32, dtype16) == (torch.float32, torch.bfloat16)
    assert loss16 == pytest.approx(loss32, rel=0.01)
    curve32, curve16 = (train_losses(config(p, "train.epochs=3", "train.eval_every=0"),
                                     tmp_path / p, data_dir) for p in ("fp32", "bf16"))
    assert curve16[-1] < 0.67 * curve16[0]
    assert curve16[-1] == pytest.approx(curve32[-1], rel=0.05)


# --- on the CPU --------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ARCHS)
def test_bf16_autocast_trains_like_fp32_on_the_cpu(arch: str, tiny_data_dir: Path,
                                                   tmp_path: Path) -> None:
    """``train.precision = "bf16"`` autocasts on the CPU as on a GPU (emulated where the CPU
    has no bf16 units: slower, the same arithmetic)."""
    assert_bf16_trains_like_fp32(arch, "cpu", tiny_data_dir, tmp_path)


@pytest.mark.parametrize(("vendor", "flags", "env", "expected", "said"), [
    ("AuthenticAMD", "fpu avx2 avx512f avx512_bf16 avx512_vnni", None, torch.bfloat16,
     "bf16 autocast (train.precision = auto: this CPU has avx512_bf16)"),
    ("GenuineIntel", "fpu avx512f avx512_bf16 amx_bf16 amx_tile", None, torch.bfloat16,
     "this CPU has amx_bf16"),
    # Intel's AVX-512 BF16 without AMX: MKL's fp32 is faster there
    ("GenuineIntel", "fpu avx2 avx512f avx512_bf16 avx512_vnni", None, None,
     "precision: fp32 (this Intel CPU has avx512_bf16 without AMX, where fp32 is faster)"),
    ("AuthenticAMD", "fpu avx2 fma", None, None, "precision: fp32 (this CPU has no bf16 units)"),
    ("AuthenticAMD", "fpu avx2 fma", "1", torch.bfloat16,
     "(train.precision = auto: NMT_CPU_BF16=1)"),
    ("GenuineIntel", "fpu avx512_bf16", "1", torch.bfloat16, "NMT_CPU_BF16=1"),
    ("AuthenticAMD", "fpu avx512_bf16", "0", None, "precision: fp32 (NMT_CPU_BF16=0)"),
])
def test_auto_precision_follows_the_cpus_bf16_units(
        vendor: str, flags: str, env: str | None, expected: torch.dtype | None, said: str,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cpu_bf16: BF16) -> None:
    """``train.precision = "auto"``: bf16 where the CPU computes in bf16 faster than in fp32
    (its vendor and flags), fp32 elsewhere; ``NMT_CPU_BF16`` overrides; the training log says
    which and why; fp32 and bf16 force either; CUDA is bf16."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nvendor_id\t: {vendor}\nmodel name\t: A CPU\n"
                       f"flags\t\t: {flags}\n")
    monkeypatch.setattr(nmt.device, "CPUINFO", str(cpuinfo))
    cpu_bf16(env)
    cpu = torch.device("cpu")
    assert nmt.device.autocast_dtype(cpu, "auto") == expected
    assert said in nmt.device.precision_said(cpu, "auto")
    assert nmt.device.autocast_dtype(cpu, "fp32") is None
    assert nmt.device.autocast_dtype(cpu, "bf16") == torch.bfloat16
    assert nmt.device.autocast_dtype(torch.device("cuda"), "auto") == torch.bfloat16


def test_auto_precision_trains_in_what_it_chose(tiny_data_dir: Path, cpu_bf16: BF16) -> None:
    for env, dtype in (("1", torch.bfloat16), ("0", torch.float32)):
        cpu_bf16(env)
        cfg = tiny_config("transformer")  # train.precision = auto, the default
        assert one_step(cfg, tiny_data_dir, torch.device("cpu"))[1] == dtype


@pytest.mark.parametrize(("device", "precision", "bf16_units", "preset", "expected"), [
    ("cpu", "auto", "1", None, nmt.device.CPU_BF16_KERNELS),
    ("cpu", "bf16", "0", None, nmt.device.CPU_BF16_KERNELS),
    ("cpu", "auto", "1", "7", "7"),  # the user's setting stands
    ("cpu", "auto", "0", None, None),  # fp32: oneDNN's cache is left alone
    ("cpu", "fp32", "1", None, None),
    ("cuda", "auto", "1", None, None),
])
def test_cpu_bf16_training_bounds_onednns_kernel_cache(
        device: str, precision: str, bf16_units: str, preset: str | None, expected: str | None,
        monkeypatch: pytest.MonkeyPatch, cpu_bf16: BF16) -> None:
    cpu_bf16(bf16_units)
    if preset is None:
        monkeypatch.delenv(nmt.device.ONEDNN_CACHE, raising=False)
    else:
        monkeypatch.setenv(nmt.device.ONEDNN_CACHE, preset)
    dev = torch.device(device)
    nmt.device.bound_kernel_cache(dev, nmt.device.autocast_dtype(dev, precision))
    assert os.environ.get(nmt.device.ONEDNN_CACHE) == expected


def test_autocasting_to_bf16_on_a_cpu_bounds_the_kernel_cache(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Training autocasts through ``autocast_to``, which bounds oneDNN's cache before the first
    bf16 product, and leaves it alone in fp32 (a search's bf16: test_decode.py)."""
    monkeypatch.delenv(nmt.device.ONEDNN_CACHE, raising=False)
    cpu = torch.device("cpu")
    with nmt.device.autocast_to(cpu, None):
        assert nmt.device.ONEDNN_CACHE not in os.environ
    with nmt.device.autocast_to(cpu, torch.bfloat16):
        assert os.environ.get(nmt.device.ONEDNN_CACHE) == nmt.device.CPU_BF16_KERNELS
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16


@pytest.mark.parametrize(("device", "precision", "bf16_units", "expected"), [
    ("cpu", "auto", "1", torch.bfloat16),
    ("cpu", "auto", "0", None),
    ("cpu", "fp32", "1", None),
    ("cpu", "bf16", "0", torch.bfloat16),
    ("cuda", "auto", "1", None),  # decoding in bf16 on a GPU: not measured, so not the default
    ("cuda", "bf16", "1", torch.bfloat16),
    ("mps", "bf16", "1", None),
])
def test_decode_precision_follows_the_cpus_bf16_units(
        device: str, precision: str, bf16_units: str, expected: torch.dtype | None,
        cpu_bf16: BF16) -> None:
    cpu_bf16(bf16_units)
    assert nmt.device.decode_dtype(torch.device(device), precision) == expected


@pytest.mark.parametrize("arch", ARCHS)
def test_search_decodes_in_decode_precision(arch: str, cpu_bf16: BF16) -> None:
    """``decode.precision``: the searches' output layer computes in bf16 where ``auto`` says so
    (a CPU with bf16 units) or ``bf16`` forces it, in fp32 otherwise; every setting decodes."""
    model = trained_toy(arch)
    ids = [src_ids(t) for t in TEXTS[:6]]
    seen: list[torch.dtype] = []
    hook = model.out.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    try:
        for units, precision, beam, dtype in (("1", "auto", 1, torch.bfloat16),
                                              ("1", "auto", 3, torch.bfloat16),
                                              ("0", "bf16", 1, torch.bfloat16),
                                              ("1", "fp32", 1, torch.float32),
                                              ("0", "auto", 3, torch.float32)):
            cpu_bf16(units)
            seen.clear()
            hyps = search_ids(model, ids, DecodeConfig(beam=beam, precision=precision))
            assert len(hyps) == len(ids) and all(h.tokens or h.finished for h in hyps)
            assert seen and set(seen) == {dtype}, (units, precision, beam)
    finally:
        hook.remove()


def compiled_and_plain(tiny_data_dir: Path, tmp_path: Path) -> tuple[list[dict[str, Any]], ...]:
    """The metric lines of the same short training with and without ``train.compile``."""
    runs = []
    for compiled in (False, True):
        cfg = tiny_config("transformer", "model.dropout=0", "train.max_steps=6",
                          "train.eval_every=3", f"train.compile={str(compiled).lower()}")
        train(cfg, tmp_path / str(compiled), data_dir=tiny_data_dir, log=lambda s: None)
        load_run(tmp_path / str(compiled))  # the checkpoint holds the plain model's weights
        runs.append(run_metrics(tmp_path / str(compiled)))
    return tuple(runs)


def test_compile_option_compiles_the_training_forward(monkeypatch: pytest.MonkeyPatch,
                                                      tiny_data_dir: Path,
                                                      tmp_path: Path) -> None:
    """``train.compile = true`` hands the training forward to torch.compile (traced by
    TorchDynamo and run eagerly here, which takes seconds; the real compiler: the slow test
    below) and trains exactly as without it."""
    compiled = []
    real_compile = torch.compile

    def traced_only(model: torch.nn.Module, **kwargs: Any) -> Any:
        compiled.append((kwargs.get("mode"), os.environ.get(nmt.device.INDUCTOR_CACHE)))
        return real_compile(model, backend="eager", **kwargs)

    monkeypatch.setattr(torch, "compile", traced_only)
    monkeypatch.delenv(nmt.device.INDUCTOR_CACHE, raising=False)
    plain, with_compile = compiled_and_plain(tiny_data_dir, tmp_path)
    capability = torch.backends.cpu.get_cpu_capability()
    # train.compile_mode's default, and the kernels kept apart by CPU capability
    assert compiled == [("default", os.path.join(default_cache_dir(), f"nmt-{capability}"))]
    assert with_compile == plain


def test_compiled_kernels_are_kept_apart_by_cpu_capability(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Inductor's on-disk cache does not tell AVX2 from AVX-512 computing apart (a kernel of one
    reused by the other aborted a training), so each gets a folder of its own; a folder the user
    chose (TORCHINDUCTOR_CACHE_DIR) is kept."""
    folders: list[str] = []
    for capability in ("AVX512", "AVX2", "AVX512"):
        monkeypatch.delenv(nmt.device.INDUCTOR_CACHE, raising=False)
        monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda c=capability: c)
        folders.append(nmt.device.separate_compiled_kernels())
        assert os.environ[nmt.device.INDUCTOR_CACHE] == folders[-1]
    assert folders[0] == folders[2] != folders[1]
    assert folders[1] == os.path.join(default_cache_dir(), "nmt-AVX2")
    monkeypatch.setenv(nmt.device.INDUCTOR_CACHE, "/kept/here")
    assert nmt.device.separate_compiled_kernels() == "/kept/here"
    # Inductor's own default, which it writes into the variable as it is imported, is not kept
    monkeypatch.setenv(nmt.device.INDUCTOR_CACHE, default_cache_dir())
    assert nmt.device.separate_compiled_kernels() == folders[0]


@pytest.mark.slow
def test_compile_option_with_the_compiler(tiny_data_dir: Path, tmp_path: Path) -> None:
    """The same with torch's default compiler (Inductor, C++ on the CPU): about four minutes of
    compiling on a slow two-core machine, hence slow. Its kernels round differently."""
    plain, with_compile = compiled_and_plain(tiny_data_dir, tmp_path)
    assert [r.keys() for r in with_compile] == [r.keys() for r in plain]
    for a, b in zip(with_compile, plain, strict=True):
        for key in ("train_loss", "valid_loss"):
            if a.get(key) is not None:
                assert a[key] == pytest.approx(b[key], rel=1e-3)


# --- on CUDA -----------------------------------------------------------------------------------


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("arch", ARCHS)
def test_bf16_autocast_trains_like_fp32_on_cuda(arch: str, tiny_data_dir: Path,
                                                tmp_path: Path) -> None:
    assert_bf16_trains_like_fp32(arch, "cuda", tiny_data_dir, tmp_path)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("optimizer", ["adam", "adamw"])
def test_cuda_uses_the_fused_optimizer(optimizer: str) -> None:
    """On CUDA the optimizer is the fused kernel, and its step equals the per-tensor one."""
    cfg = tiny_config("transformer", "model.dropout=0", f"train.optimizer={optimizer}",
                      "train.weight_decay=0.01")
    torch.manual_seed(0)
    model = build_model(cfg.model, 40, 40).cuda()
    fused, _ = build_optimizer(cfg.train, model)
    assert fused.defaults["fused"] is True
    twin = copy.deepcopy(model)
    plain = type(fused)(twin.parameters(), lr=cfg.train.lr, betas=(0.9, 0.999),
                        weight_decay=0.01, foreach=False)
    src, tgt = torch.randint(4, 40, (3, 5), device="cuda"), torch.randint(4, 40, (3, 6),
                                                                          device="cuda")
    lengths = torch.tensor([5, 4, 2], device="cuda")
    for m, opt in ((model, fused), (twin, plain)):
        for _ in range(3):
            opt.zero_grad()
            m(src, lengths, tgt).float().logsumexp(-1).mean().backward()
            opt.step()
    for a, b in zip(model.parameters(), twin.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-5)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("arch", ARCHS)
def test_cache_on_cuda_equals_the_full_pass_and_the_cpu(arch: str) -> None:
    """The incremental state on the GPU gives the teacher-forced pass's logits, and the CPU's."""
    cpu_model = trained_toy(arch)
    model = copy.deepcopy(cpu_model).cuda()
    src, lengths = pad_batch([src_ids(t) for t in TEXTS[:8]], torch.device("cuda"))
    tgt = torch.randint(4, 10, (8, 6), device="cuda")
    with torch.no_grad():
        memory = model.encode(src, lengths)
        full = model.decode(tgt, memory).logits
        cached = step_by_step_logits(model, memory, tgt)
        on_cpu = cpu_model.decode(tgt.cpu(), cpu_model.encode(src.cpu(), lengths.cpu())).logits
    assert torch.allclose(cached, full, atol=1e-4)
    assert torch.allclose(full.cpu(), on_cpu, atol=1e-4)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("beam", [1, 3])
def test_batched_equals_one_by_one_on_cuda(arch: str, beam: int) -> None:
    """As tests/test_decode.py's test on the CPU, with the trained toy model on the GPU."""
    model = copy.deepcopy(trained_toy(arch)).cuda()
    ids = [src_ids(t) for t in TEXTS[:20]]
    cfg = DecodeConfig(beam=beam, max_len_a=1.0, max_len_b=4)
    batched = search_ids(model, ids, replace(cfg, batch_size=8))
    alone = []
    for one in ids:
        src, lengths = pad_batch([one], torch.device("cuda"))
        limit = output_limit(len(one), cfg, model.max_positions)
        alone.append(greedy(model, src, lengths, limit)[0] if beam == 1 else
                     beam_search(model, src, lengths, limit, beam, cfg.length_penalty)[0][0])
    assert [h.tokens for h in batched] == [h.tokens for h in alone]
    assert [h.score for h in batched] == pytest.approx([h.score for h in alone], abs=1e-4)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("arch", ARCHS)
def test_checkpoints_move_between_cuda_and_the_cpu(arch: str, tiny_data_dir: Path,
                                                   tmp_path: Path) -> None:
    """A run trained on the GPU resumes on the CPU and back on the GPU, and its checkpoint
    translates alike on both."""
    run = tmp_path / "run"
    for device, epochs in (("cuda", 1), ("cpu", 2), ("cuda", 3)):
        cfg = tiny_config(arch, f"train.device={device}", f"train.epochs={epochs}",
                          "train.precision=bf16")
        result = train(cfg, run, data_dir=tiny_data_dir, resume=epochs > 1,
                       log=lambda s: None)
        assert result.progress.epoch == epochs and result.device.startswith(device)
    on_gpu, on_cpu = load_run(run, device="cuda"), load_run(run, device="cpu")
    src, lengths = pad_batch([[5, 6, 7, 2], [8, 9, 2]], torch.device("cpu"))
    tgt = torch.tensor([[1, 5, 6], [1, 7, 8]])
    with torch.no_grad():
        gpu_logits = on_gpu.model(src.cuda(), lengths.cuda(), tgt.cuda()).cpu()
        cpu_logits = on_cpu.model(src, lengths, tgt)
    assert torch.allclose(gpu_logits, cpu_logits, atol=1e-4)


# --- the check and its bundle (bench/gpu.py) ---------------------------------------------------


def test_bundle_holds_every_dependency_but_torch() -> None:
    from bench.gpu import bundle_requirements, requirement_name

    names = {requirement_name(r) for r in bundle_requirements()}
    assert {"numpy", "sacrebleu", "sentencepiece", "typer", "pytest", "hypothesis",
            "ctranslate2"} <= names
    assert not names & {"torch", "ruff", "mypy"}


def test_bundle_leaves_out_what_the_gpu_machine_has(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path,
                                                    tiny_corpus_zip: Path) -> None:
    """pip download is asked for CPython 3.12 wheels only; the wheels of projects the machine
    lists (``pip list --format=freeze``) are dropped; the corpus travels along."""
    import subprocess

    import bench.gpu as gpu

    asked = []

    def download(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        asked.append(cmd)
        dest = Path(cmd[cmd.index("--dest") + 1])
        for wheel in ("numpy-2.5.5-cp312-cp312-manylinux_2_28_x86_64.whl",
                      "ctranslate2-4.8.5-cp312-cp312-manylinux_2_28_x86_64.whl",
                      "Typing_Extensions-4.16.0-py3-none-any.whl"):
            (dest / wheel).write_bytes(b"x")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(subprocess, "run", download)
    present = tmp_path / "present.txt"
    present.write_text("numpy==2.5.2\ntyping-extensions==4.15.0\n# a comment\n")
    manifest = gpu.make_bundle(tmp_path / "bundle", present=gpu.read_present(present),
                               corpus=tiny_corpus_zip, log=lambda s: None)
    assert "--only-binary=:all:" in asked[0] and "3.12" in asked[0]
    assert manifest["wheels"] == ["ctranslate2-4.8.5-cp312-cp312-manylinux_2_28_x86_64.whl"]
    assert len(manifest["left_out_as_present"]) == 2
    assert (tmp_path / "bundle" / "fra-eng.zip").read_bytes() == tiny_corpus_zip.read_bytes()
    assert "torch" not in (tmp_path / "bundle" / "requirements.txt").read_text()


def test_bundle_download_failure_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    import subprocess

    import bench.gpu as gpu
    from nmt.errors import NmtError

    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(
        cmd, 1, "", "ERROR: Could not find a version\nERROR: No matching distribution found"))
    with pytest.raises(NmtError, match="pip download: exited with status 1: ERROR: No match"):
        gpu.make_bundle(tmp_path / "bundle", log=lambda s: None)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks what happens without CUDA")
def test_check_without_cuda_skips_every_step_and_says_so(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    """Never a silent pass: each step's files and the terminal say it was skipped and why;
    the exit status is 0 (a CPU-only CI stays green) unless --require-gpu asks for 1."""
    import json

    from bench.gpu import STEPS, main

    main(["check", "--out", str(tmp_path)])
    shown = capsys.readouterr().out
    for step in STEPS:
        result = json.loads((tmp_path / f"{step}.json").read_text())
        assert result["status"] == "skipped" and "no CUDA device" in result["reason"]
        assert "skipped: no CUDA device is visible" in (tmp_path / f"{step}.md").read_text()
        assert f"gpu-check {step}: skipped: no CUDA device is visible" in shown
    assert not (tmp_path / "spans.json").exists()  # run only when named
    main(["check", "--step", "spans", "--out", str(tmp_path)])
    assert json.loads((tmp_path / "spans.json").read_text())["status"] == "skipped"
    with pytest.raises(SystemExit) as stopped:
        main(["check", "--step", "speed", "--out", str(tmp_path), "--require-gpu"])
    assert stopped.value.code == 1
    assert "error: --require-gpu: no CUDA device is visible" in capsys.readouterr().err


def test_decode_step_needs_the_runs_of_the_training_steps(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    import bench.gpu as gpu

    monkeypatch.setattr(gpu, "ROOT", tmp_path)
    result, _ = gpu.step_decode(gpu.Step("decode", tmp_path, lambda s: None))
    assert result["status"] == "error" and "run STEP=transformer and STEP=gru first" in \
        result["reason"]


def test_speed_measurement_runs_on_the_cpu(tiny_data_dir: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The throughput child on the CPU with a tiny model: real steps at the config's batch, a
    doubled batch that fits, and the figures of each (memory only on CUDA)."""
    import json

    from bench.gpu import speed_child

    tiny = ["data.vocab_size=64", "data.valid_frac=0.1", "data.test_frac=0.1",
            "model.d_model=16", "model.d_ff=32", "model.n_heads=2", "model.n_layers=1",
            "train.batch_size=300", "train.pad_to_multiple=8"]
    speed_child(Path("configs/transformer.toml"), "", steps=2, warmup=1, doublings=1,
                data_dir=tiny_data_dir, device_name="cpu", overrides=tiny)
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["which"] for r in rows] == ["config", "average update", "fits", "search",
                                          "largest"]
    assert rows[3] == {"which": "search", "largest": 600, "out_of_memory_at": None}
    averaging = rows[1]
    assert averaging["parameters"] > 10
    assert averaging["foreach_ms"] > 0 and averaging["per_parameter_ms"] > 0
    for r in (rows[0], rows[4]):
        assert r["compile_mode"] == ""
        assert r["target_tokens_per_s"] > 0 and r["steps"] == 2 and r["flops_per_token"] > 0
        assert r["mfu"] is None and r["peak_memory_bytes"] is None
        # padded to repeating shapes, the epoch's distinct shapes are counted
        assert r["pad_to_multiple"] == 8
        assert 0 < r["epoch_distinct_shapes"] <= r["epoch_batches"]
        assert 0 < r["epoch_padding_share"] < 1
    assert 0 < rows[0]["estimated_memory_bytes"] < rows[4]["estimated_memory_bytes"]


def write_spans_corpus(folder: Path, lines: int = 3) -> Path:
    import json

    folder.mkdir(parents=True)
    (folder / "corpus.json").write_text(json.dumps({
        "target": "fr", "locales": "made for the test", "catalogues": 1, "entries": 2 * lines,
        "pairs": 2 * lines, "training_pairs": lines, "training_pairs_with_spans": lines,
        "test_lines": lines, "test_lines_with_spans": lines}))
    for name in ("README", "sources.tsv"):
        (folder / name).write_text(name + "\n")
    for side in ("software", "test"):
        (folder / f"{side}.en").write_text("".join(f"Cannot open file {k} %s\n"
                                                   for k in range(lines)))
        (folder / f"{side}.fr").write_text("".join(f"Impossible d'ouvrir le fichier {k} %s\n"
                                                   for k in range(lines)))
    return folder


def test_bundle_carries_the_software_strings(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    import subprocess

    import bench.gpu as gpu
    from nmt.errors import NmtError

    monkeypatch.setattr(subprocess, "run",
                        lambda cmd, **kw: subprocess.CompletedProcess(cmd, 0, "", ""))
    corpus = write_spans_corpus(tmp_path / "corpus")
    (corpus / "software.origin").write_text("not needed\n")
    manifest = gpu.make_bundle(tmp_path / "bundle", spans=corpus, log=lambda s: None)
    assert manifest["spans"]
    carried = sorted(p.name for p in (tmp_path / "bundle" / "spans").iterdir())
    assert carried == ["README", "corpus.json", "software.en", "software.fr", "sources.tsv",
                       "test.en", "test.fr"]
    with pytest.raises(NmtError, match=r"^--spans .*: no software-strings corpus there"):
        gpu.make_bundle(tmp_path / "b2", spans=tmp_path / "nowhere", log=lambda s: None)
    (corpus / "test.fr").unlink()
    with pytest.raises(NmtError, match=r"^--spans .*: no test.fr there$"):
        gpu.copy_spans_corpus(corpus, tmp_path / "b3")


@pytest.mark.slow
def test_spans_step_runs_on_the_cpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                    tiny_data_dir: Path) -> None:
    """The spans step's plumbing with a tiny model: the measurement's rows for nmt and
    CTranslate2, and the parts that carry the Argos package back, whole."""
    import bench.gpu as gpu
    from bench import software_strings

    monkeypatch.setattr(gpu, "ROOT", tmp_path)
    step = gpu.Step("spans", tmp_path / "out", lambda s: None, 600)
    result, table = gpu.step_spans(step, tiny_data_dir, write_spans_corpus(tmp_path / "c", 12),
                                   device="cpu", config="demo",
                                   settings=["train.max_steps=2", "data.vocab_size=120",
                                             "train.threads=1"])
    assert result["status"] == "passed", result
    assert result["trained_steps"] == 2
    assert [(r["test"], r["engine"], r["spans"]) for r in result["rows"]] == [
        (t, e, s) for t in ("software", "prose") for e, s in software_strings.ENGINES
        if e != "argos"]
    assert "| software | nmt | repair |" in table
    names = software_strings.unpack(tmp_path / "out", tmp_path / "back")
    assert {"software-mix.argosmodel", "results.json", "test.en", "prose-test.en"} <= set(names)


@pytest.mark.parametrize(("args", "message"), [
    (["--step", "train"], "--step train: expected all or one of tests, speed, transformer"),
    (["--seconds", "30"], "--seconds 30: expected 60 to 3600"),
    (["--workers", "-1"], "--workers -1: expected 0 or more"),
])
def test_bad_check_options_are_one_line_errors(args: list[str], message: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from bench.gpu import main

    with pytest.raises(SystemExit) as stopped:
        main(["check", "--out", str(tmp_path), *args])
    err = capsys.readouterr().err
    assert stopped.value.code == 1
    assert err.startswith(f"error: {message}") and err.count("\n") == 1


@pytest.mark.gpu
@needs_cuda
def test_training_attention_on_cuda_builds_no_per_shape_plans() -> None:
    """A Transformer's training steps on the GPU, on batches of ever-new shapes, run attention
    in kernels that need no per-shape plan: cuDNN's attention (PyTorch's first choice on Hopper)
    does not appear among the operators; the memory-efficient (or flash) kernel does."""
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    cfg = tiny_config("transformer")
    model = build_model(cfg.model, 40, 40, joint_vocab=False).cuda()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for b, t in ((3, 5), (4, 7), (5, 6)):
            src, tgt = (torch.randint(4, 40, (b, t), device="cuda") for _ in range(2))
            lengths = torch.full((b,), t, device="cuda")
            with torch.autocast("cuda", dtype=torch.bfloat16):
                model(src, lengths, tgt).float().logsumexp(-1).mean().backward()
        torch.cuda.synchronize()
    names = {e.key for e in prof.key_averages()}
    assert any("_efficient_attention" in n or "_flash_attention" in n for n in names), \
        sorted(names)
    assert not any("cudnn_attention" in n for n in names), sorted(names)


@pytest.mark.gpu
@needs_cuda
def test_gru_layers_run_in_fp32_under_autocast_on_cuda() -> None:
    """Under bf16 autocast on the GPU the GRU's recurrent layers run cuDNN's fp32 kernels
    (:func:`nmt.models.gru.outside_cuda_autocast`), forward and backward; autocast alone ran
    them in half precision on weights it cast at every call."""
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    model = build_model(tiny_config("gru").model, 40, 40, joint_vocab=False).cuda()
    src, tgt = (torch.randint(4, 40, (6, 9), device="cuda") for _ in range(2))
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            model(src, torch.full((6,), 9, device="cuda"), tgt).float().logsumexp(-1).mean() \
                .backward()
        torch.cuda.synchronize()
    gru = [e.key for e in prof.key_averages() if "GRU" in e.key]
    assert gru, sorted(e.key for e in prof.key_averages())
    assert not [k for k in gru if "half" in k or "bfloat" in k or "bf16" in k], gru


def test_step_profile_runs_on_the_cpu(tiny_data_dir: Path) -> None:
    """bench.profile_step on the CPU with a tiny model: the step's pace, the collator's share,
    and the operators with the most host time, the matrix products among them; no device
    figures without a device."""
    from bench.profile_step import profile

    tiny = ["data.vocab_size=64", "data.valid_frac=0.1", "data.test_frac=0.1",
            "model.d_model=16", "model.d_ff=32", "model.n_heads=2", "model.n_layers=1",
            "train.batch_size=300"]
    r = profile(Path("configs/transformer.toml"), "cpu", steps=2, warmup=1,
                data_dir=tiny_data_dir, overrides=tiny, top=40)
    assert r["wall_s"] > 0 and r["target_tokens_per_s"] > 0 and 0 < r["collate_s"] < r["wall_s"]
    assert r["device_busy_s"] is None and r["kernels_per_step"] is None and not r["self_device"]
    ops = {row["op"] for row in r["self_cpu"]}
    assert ops & {"aten::mm", "aten::addmm", "aten::bmm"}, ops
    assert all(row["self_cpu_ms"] >= 0 for row in r["self_cpu"])


def test_step_profile_says_where_the_copies_come_from(tiny_data_dir: Path) -> None:
    """``--copies`` on the CPU: every ``aten::copy_`` of the profiled steps, grouped by the
    operators that made it; the forward's copies name the function of nmt's code that ran
    them, the head-merging reshape of the attention among them."""
    from bench.profile_step import profile

    tiny = ["data.vocab_size=64", "data.valid_frac=0.1", "data.test_frac=0.1",
            "model.d_model=16", "model.d_ff=32", "model.n_heads=2", "model.n_layers=1",
            "train.batch_size=300"]
    r = profile(Path("configs/transformer.toml"), "cpu", steps=2, warmup=1,
                data_dir=tiny_data_dir, overrides=tiny, top=100, copies=True)
    assert r["copies"] and all(c["calls"] > 0 and c["self_cpu_ms"] >= 0 for c in r["copies"])
    places = [c["where"] for c in r["copies"]]
    assert any(" in nmt/models/attention.py(" in w and "merge_heads" in w for w in places), \
        places
    assert any("Backward" in w and " in " not in w for w in places), places
    assert "copies" not in profile(Path("configs/transformer.toml"), "cpu", steps=1, warmup=0,
                                   data_dir=tiny_data_dir, overrides=tiny)


def test_step_profile_refuses_no_steps(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.profile_step import main

    with pytest.raises(SystemExit) as stopped:
        main(["configs/transformer.toml", "--device", "cpu", "--steps", "0"])
    err = capsys.readouterr().err
    assert stopped.value.code == 1 and err.startswith("error: --steps 0") and err.count("\n") == 1
