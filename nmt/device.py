"""Device and precision are decided here, once: ``auto`` means cuda, then mps, then cpu.

torch is imported by the functions that use it, so that :func:`usable_cpus` (data preparation's
workers count with it) costs no torch import."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

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
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next((line.split(":", 1)[1].strip() for line in f
                          if line.startswith("model name")), "")
    except OSError:
        pass
    import platform

    return f"{model or platform.processor() or platform.machine()}, " \
           f"{torch.get_num_threads()} threads"


def autocast_dtype(device: torch.device, precision: str) -> torch.dtype | None:
    """The autocast dtype for ``precision`` on ``device``, or None for plain fp32.

    Mixed precision is used on CUDA only: on CPU bf16 autocast is slower for these small models.
    """
    import torch

    if precision == "fp32" or device.type != "cuda":
        return None
    return {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]


@contextlib.contextmanager
def autocast(device: torch.device, precision: str) -> Iterator[None]:
    import torch

    dtype = autocast_dtype(device, precision)
    if dtype is None:
        yield
    else:
        with torch.autocast(device_type=device.type, dtype=dtype):
            yield


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity (``taskset``, a container's cpuset), not
    the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def set_threads(threads: int, what: str = "train.threads") -> None:
    """Pin torch's CPU thread count; 0: torch's default, at most the CPUs this process may use.
    More threads than that is refused: they only slow torch down (and a huge count can crash
    it)."""
    import torch

    cpus = usable_cpus()
    if threads > cpus:
        raise ConfigError(f"{what}: expected 0 (torch's default) to {cpus}, the CPUs this "
                          f"process may use; got {threads}")
    if threads > 0:
        torch.set_num_threads(threads)
    elif torch.get_num_threads() > cpus:
        torch.set_num_threads(cpus)
