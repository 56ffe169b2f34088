"""Device and precision are decided here, once: ``auto`` means cuda, then mps, then cpu.

torch is imported by the functions that use it, so that :func:`usable_cpus` (data preparation's
workers count with it) costs no torch import."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from nmt import environment
from nmt.errors import ConfigError

if TYPE_CHECKING:
    import torch


def resolve_device(name: str = "auto", what: str = "device") -> torch.device:
    """``"auto"`` -> the best available device; otherwise validate the requested one. ``what``
    names the option or config key in error messages."""
    import torch

    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise ConfigError(
            f"{what}: expected auto, cpu, cuda, cuda:N or mps, got {name!r}"
        ) from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"{what}: {name!r} requested but CUDA is not available on this machine")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"{what}: {name!r} requested but MPS is not available on this machine")
    return device


def hardware(device: torch.device) -> str:
    """What ``device`` is, for a run's log and its model card: the GPU's name, or the CPU's
    model and the threads torch uses."""
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type != "cpu":
        return device.type
    model = first_cpu().get("model name", "")
    import platform

    return f"{model or platform.processor() or platform.machine()}, " \
           f"{torch.get_num_threads()} threads"


BF16_UNITS = ("amx_bf16", "avx512_bf16")  # /proc/cpuinfo flags of CPUs with bf16 arithmetic
CPUINFO = "/proc/cpuinfo"


def first_cpu() -> dict[str, str]:
    """The fields :data:`CPUINFO` gives of the first CPU (``vendor_id``, ``model name``,
    ``flags``, ...); none where it cannot be read."""
    fields: dict[str, str] = {}
    try:
        with open(CPUINFO, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, colon, value = line.partition(":")
                if not colon:
                    if fields:  # the blank line after the first CPU's block
                        break
                    continue
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return fields


def _cpu_vendor_and_flags() -> tuple[str, set[str]]:
    cpu = first_cpu()
    return cpu.get("vendor_id", ""), set(cpu.get("flags", "").split())


@functools.lru_cache(maxsize=1)
def cpu_bf16_units() -> str | None:
    """The flag by which this CPU computes in bf16 faster than in fp32, or None.
    ``NMT_CPU_BF16=1`` / ``0`` says so instead (the test suite sets 0, so that it runs alike
    on every machine).

    AMX (``amx_bf16``, Intel since Sapphire Rapids) counts, and AVX-512 BF16
    (``avx512_bf16``) counts on a CPU that is not Intel's (AMD since Zen 4). On an Intel CPU
    with AVX-512 BF16 and no AMX (Cooper Lake, or a newer one whose AMX a virtual machine
    hides), MKL computes fp32 on its AVX-512 paths, which it takes on Intel only, and the demo
    trained 1.3x faster in fp32 than in bf16 (docs/BENCHMARKS.md, "bf16 on the CPU")."""
    given = environment.read("NMT_CPU_BF16")
    if given is not None:
        return "NMT_CPU_BF16=1" if given == "1" else None
    vendor, flags = _cpu_vendor_and_flags()
    if "amx_bf16" in flags:
        return "amx_bf16"
    if "avx512_bf16" in flags and vendor != "GenuineIntel":
        return "avx512_bf16"
    return None


def cpu_fp32_reason() -> str:
    """Why ``auto`` computes in fp32 on this CPU (:func:`cpu_bf16_units` is None)."""
    said = environment.said("NMT_CPU_BF16")
    if said:
        return said
    vendor, flags = _cpu_vendor_and_flags()
    if "avx512_bf16" in flags and vendor == "GenuineIntel":
        return "this Intel CPU has avx512_bf16 without AMX, where fp32 is faster"
    return "this CPU has no bf16 units"


def autocast_dtype(device: torch.device, precision: str) -> torch.dtype | None:
    """The autocast dtype for ``precision`` on ``device``, or None for plain fp32.

    ``auto`` (the default): bf16 on CUDA, and on a CPU with bf16 units (:func:`cpu_bf16_units`),
    where training is faster with the same loss (docs/BENCHMARKS.md, "bf16 on the CPU"); fp32
    elsewhere (on a CPU without them bf16 is emulated, and slower).
    ``fp32`` and ``bf16`` force either; ``fp16`` (CUDA only) loads but does not train.
    """
    import torch

    if precision == "fp32" or device.type not in ("cuda", "cpu"):
        return None
    if precision == "auto":
        if device.type == "cuda" or cpu_bf16_units():
            return torch.bfloat16
        return None
    if precision == "fp16":
        return torch.float16 if device.type == "cuda" else None
    return torch.bfloat16


def decode_dtype(device: torch.device, precision: str) -> torch.dtype | None:
    """The dtype searches run in for ``decode.precision``, or None for fp32: the dtype of the
    model's weights they use (:func:`nmt.translation.search.in_precision`).

    ``auto`` (the default): bf16 on a CPU with bf16 units (:func:`cpu_bf16_units`), where greedy
    search is faster with BLEU within noise (docs/BENCHMARKS.md, "bf16 on the CPU"); fp32
    elsewhere, on CUDA too, where decoding in bf16 has not been measured. ``bf16`` and ``fp32``
    force either.
    """
    if precision == "auto" and device.type == "cuda":
        return None
    return autocast_dtype(device, precision)


def precision_said(device: torch.device, precision: str) -> str:
    """Which precision training runs in and why, for the training log."""
    dtype = autocast_dtype(device, precision)
    if dtype is None:
        why = ("train.precision = fp32" if precision == "fp32" else
               f"no mixed precision on {device.type}" if device.type != "cpu" else
               cpu_fp32_reason())
        return f"precision: fp32 ({why})"
    if precision != "auto":
        return f"precision: {str(dtype).removeprefix('torch.')} autocast (train.precision)"
    why = ("CUDA" if device.type == "cuda" else environment.said("NMT_CPU_BF16")
           or f"this CPU has {cpu_bf16_units()}")
    return f"precision: bf16 autocast (train.precision = auto: {why})"


ONEDNN_CACHE = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"
CPU_BF16_KERNELS = "128"
"""How many compiled matrix-product kernels oneDNN keeps while computing in bf16 on a CPU (its
default, 1,024, grew the demo's training from 1.1 GB to 3.7 GB: docs/BENCHMARKS.md)."""


def bound_kernel_cache(device: torch.device, dtype: torch.dtype | None) -> None:
    """Before computing in bf16 (``dtype``, from :func:`autocast_dtype` or
    :func:`decode_dtype`) on a CPU: keep at most :data:`CPU_BF16_KERNELS` of oneDNN's compiled
    kernels, unless ``ONEDNN_PRIMITIVE_CACHE_CAPACITY`` is set already.

    bf16 products run through oneDNN, which compiles a kernel for each new shape and keeps
    them; batches of sentences come in many shapes, so the kept kernels pile up. A product's
    kernels are reused within a step (forward and backward), and rarely across steps, so a
    smaller cache costs no speed (measured on the demo). oneDNN reads the variable when it
    compiles its first kernel, which is why :func:`autocast_to` (training) calls this as it
    enters, and :func:`nmt.translation.search.search_ids` before it searches."""
    if device.type == "cpu" and dtype is not None:
        os.environ.setdefault(ONEDNN_CACHE, CPU_BF16_KERNELS)


INDUCTOR_CACHE = "TORCHINDUCTOR_CACHE_DIR"


def separate_compiled_kernels() -> str:
    """Before ``torch.compile`` (``train.compile``): keep the kernels Inductor compiles and
    caches on disk apart for each CPU capability torch computes with (``AVX512``, ``AVX2``:
    ``ATEN_CPU_CAPABILITY`` chooses it), in a folder of its own under Inductor's cache, unless
    ``TORCHINDUCTOR_CACHE_DIR`` names a folder other than that cache (Inductor writes its
    default into the variable once anything has imported it); the folder.

    Inductor's cache (in the temporary directory, shared by every process of the user) does not
    tell the capabilities apart: with torch 2.13, a training compiled as AVX2 computes that found
    the kernels of one compiled as AVX-512 computes (or the other way round) aborted the process
    or trained to a non-finite loss, and each passed with a cache of its own
    (docs/RELIABILITY.md)."""
    import torch
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    default = os.path.abspath(default_cache_dir())
    chosen = environment.read(INDUCTOR_CACHE)
    if chosen and os.path.abspath(chosen) != default:
        return chosen
    folder = os.path.join(default, f"nmt-{torch.backends.cpu.get_cpu_capability()}")
    os.environ.update({INDUCTOR_CACHE: folder})  # Inductor reads it each time it looks
    return folder


@contextlib.contextmanager
def autocast_to(device: torch.device, dtype: torch.dtype | None) -> Iterator[None]:
    """Autocast to ``dtype`` on ``device``; None: plain fp32. In bf16 on a CPU, oneDNN's kernel
    cache is bounded first (:func:`bound_kernel_cache`)."""
    import torch

    bound_kernel_cache(device, dtype)
    if dtype is None:
        yield
    else:
        with torch.autocast(device_type=device.type, dtype=dtype):
            yield


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager[None]:
    """Autocast for training in ``train.precision`` (:func:`autocast_dtype`)."""
    return autocast_to(device, autocast_dtype(device, precision))


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity (``taskset``, a container's cpuset), not
    the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def set_threads(threads: int, what: str = "train.threads") -> str | None:
    """Pin torch's CPU thread count; 0: torch's default, at most the CPUs this process may use.

    A count above the usable CPUs (``taskset``, a container's cpuset, a one-core VM) is lowered
    to them: more threads than CPUs only slow torch down, and a shipped config that asks for two
    must still run on one. Returns the one-line note saying so, or None."""
    import torch

    cpus = usable_cpus()
    if threads > cpus:
        torch.set_num_threads(cpus)
        return (f"{what} = {threads}, but this process may use {cpus} "
                f"CPU{'s' if cpus > 1 else ''}: training with {cpus} thread"
                f"{'s' if cpus > 1 else ''}")
    if threads > 0:
        torch.set_num_threads(threads)
    elif torch.get_num_threads() > cpus:
        torch.set_num_threads(cpus)
    return None
