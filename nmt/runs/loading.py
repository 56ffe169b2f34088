"""Loading a trained run for inference: ``nmt translate``, ``bleu``, ``plot`` and ``export``.

:func:`load_run` rebuilds the model a checkpoint describes from its own config (checked against
the weights' names and shapes before anything is allocated), loads the run's tokenizer and
takes the weights' moving average when the run kept one. ``--run`` and ``--checkpoint``
become files in :mod:`nmt.runs.paths` (no torch there: the CTranslate2 path uses it).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from nmt.arguments import option
from nmt.config import Config, from_dict
from nmt.errors import CheckpointError, ConfigError, NmtError, first_line
from nmt.runs.checkpoint import check_dense, check_tokenizer, load_checkpoint
from nmt.runs.directory import run_config
from nmt.runs.paths import (  # noqa: F401 - latest_run, resolve_checkpoint re-exported
    RUNS_DIR,
    checkpoint_path,
    latest_run,
    resolve_checkpoint,
)

if TYPE_CHECKING:
    from nmt.config import ModelConfig
    from nmt.data.tokenizers import Tokenizer
    from nmt.models.base import EncoderDecoder

@dataclass
class LoadedRun:
    """A trained model ready to translate, with the run, checkpoint and config it came from."""

    run_dir: Path
    config: Config
    model: EncoderDecoder  # in eval mode, on `device`
    tokenizer: Tokenizer
    checkpoint_path: Path
    step: int
    device: torch.device
    weights: str = "trained"  # "averaged" (the moving average), "trained" or "raw" (trained
    # weights of a run that has an average, taken with averaged=False)


def load_run(
    run_dir: Path | None = None, checkpoint: str = "best", device: str | torch.device = "cpu",
    averaged: bool = True,
) -> LoadedRun:
    """Rebuild a trained model, its config and tokenizer from a run directory for inference.

    ``averaged``: a run trained with ``train.ema_decay`` translates with the weights' moving
    average (what validation chose ``best.pt`` by); False takes the trained weights as they are.
    """
    from nmt.device import resolve_device

    run_dir = latest_run() if run_dir is None else Path(run_dir)
    if not run_dir.is_dir():
        raise CheckpointError(f"{option('run')} {run_dir}: run directory not found")
    path = resolve_checkpoint(run_dir, checkpoint)
    dev = device if isinstance(device, torch.device) else resolve_device(device)
    payload = load_checkpoint(path, folder=run_dir if checkpoint in ("best", "last") else None)
    try:
        cfg = from_dict(payload["config"], where=str(path), saved=True)
        vocab = payload["vocab"]
    except (KeyError, TypeError, ConfigError) as e:
        raise CheckpointError(f"{path}: incompatible checkpoint (bad config: {e})") from None
    if os.path.lexists(run_dir / "config.toml") and checkpoint_path(run_dir).parent in path.parents:
        cfg = run_config(run_dir, cfg)  # a hand edit of its [decode] counts, as on --resume
    tokenizer = run_tokenizer(run_dir)
    check_tokenizer(path, vocab, tokenizer, f"{run_dir}/tokenizer")
    weights, kind = payload["model"], "trained"
    if isinstance(payload.get("ema"), dict) and "weights" in payload["ema"]:
        kind = "averaged" if averaged else "raw"
        if averaged:
            weights = payload["ema"]["weights"]
    model = _build_for(path, cfg, vocab, weights)
    try:
        model.load_state_dict(weights)
    except (RuntimeError, KeyError) as e:
        raise CheckpointError(f"{path}: incompatible checkpoint ({first_line(e, 200)})") from None
    for name, param in model.named_parameters():
        if not bool(torch.isfinite(param).all()):
            raise CheckpointError(f"{path}: corrupt checkpoint (weight {name} holds NaN or "
                                  "infinite values)")
    model.to(dev).eval()
    step = int(payload.get("progress", {}).get("step", 0))
    return LoadedRun(run_dir, cfg, model, tokenizer, path, step, dev, kind)


def run_tokenizer(run_dir: Path) -> Tokenizer:
    """The tokenizer a run was trained with (``RUN/tokenizer``); a one-line error when a file
    of it is missing or damaged."""
    from nmt.data.tokenizers import load_tokenizer

    try:
        return load_tokenizer(run_dir / "tokenizer")
    except NmtError:
        raise
    except Exception as e:  # noqa: BLE001 - any unreadable tokenizer file is a user-facing error
        raise CheckpointError(f"{run_dir}/tokenizer: cannot load tokenizer "
                              f"({first_line(e)})") from None


_INITIALISERS = ("uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_",
                 "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
                 "orthogonal_")


@contextmanager
def shapes_only() -> Iterator[None]:
    """Build modules on the meta device (shapes, no memory) without running their initialisers.

    On meta tensors ``torch.nn.init`` goes through torch's Python reference kernels, whose first
    call imports ``torch._dynamo``: about a second of ``nmt translate``'s start-up, for values
    that a meta tensor does not even hold. Not thread-safe (it swaps ``torch.nn.init``'s
    functions for no-ops while it is open).
    """
    saved = {name: getattr(torch.nn.init, name) for name in _INITIALISERS}

    def keep(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        return tensor

    try:
        for name in _INITIALISERS:
            setattr(torch.nn.init, name, keep)
        with torch.device("meta"):
            yield
    finally:
        for name, fn in saved.items():
            setattr(torch.nn.init, name, fn)


DERIVED_BYTES = 64 * 2**20  # what a model may ask beyond the weights its file holds


def _tensor_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of ``tensors``, each counted once (a tied weight is one tensor in several places)."""
    unique = {id(t): t for t in tensors}
    return sum(t.numel() * t.element_size() for t in unique.values())


def _held_bytes(path: Path, state: dict[str, torch.Tensor]) -> int:
    """Bytes the tensors of ``state`` hold in the file: their storages, each counted once
    (every tensor holding all of its elements, :func:`nmt.runs.checkpoint.check_dense`)."""
    storages: dict[int, int] = {}
    for name, t in state.items():
        check_dense(path, f"weight {name}", t)
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(storages.values())


def check_weights(path: Path, cfg: Config, vocab: dict[str, Any],
                  state: dict[str, torch.Tensor]) -> None:
    """Refuse, before anything is allocated, a checkpoint whose weights do not fit the model
    its config describes (built on the meta device): every weight of the right name and shape,
    and the whole model (weights and computed tables such as the position table) at most the
    bytes the file's tensors hold plus :data:`DERIVED_BYTES`. A crafted file (a few MB whose
    config asks for gigabytes) fails here, not in an allocation."""
    from nmt.models.build import build_model

    try:
        with shapes_only():  # no memory, no initialisation
            shapes = build_model(cfg.model, vocab["src"], vocab["tgt"],
                                 joint_vocab=vocab["joint"])
            expected = {k: tuple(v.shape) for k, v in shapes.state_dict().items()}
            saved = set(shapes.state_dict())
            derived = _tensor_bytes(b for name, b in shapes.named_buffers() if name not in saved)
            needed = _tensor_bytes([*shapes.parameters(), *shapes.buffers()])
    except (ConfigError, RuntimeError, ValueError, OverflowError) as e:
        raise CheckpointError(f"{path}: incompatible checkpoint ({first_line(e)})") from None
    found = {k: tuple(v.shape) for k, v in state.items()}
    if expected != found:
        diff = sorted(set(expected.items()) ^ set(found.items()))[0][0]
        raise CheckpointError(
            f"{path}: incompatible checkpoint (its weights do not match its config: {diff} is "
            f"{found.get(diff, 'missing')}, expected {expected.get(diff, 'absent')})"
        )
    held = _held_bytes(path, state)
    if needed > held + DERIVED_BYTES:
        tables = (f", {_size(derived)} of them tables that are not in the file, e.g. "
                  f"model.max_positions={cfg.model.max_positions}" if derived > DERIVED_BYTES
                  else "")
        raise CheckpointError(
            f"{path}: incompatible checkpoint (its config asks for a model of {_size(needed)}"
            f"{tables}, but the file's weights hold only {_size(held)}; at most the size of its "
            f"weights plus {DERIVED_BYTES // 2**20} MiB is allowed)"
        )


def model_bytes(model: ModelConfig, tokenizer: Tokenizer, where: str) -> int:
    """Bytes of the weights a checkpoint of the model ``model`` describes over ``tokenizer``'s
    vocabularies holds (its parameters and saved buffers, each counted once), computed on the
    meta device; a one-line error after ``where`` (the config's file) for a model that cannot
    be built."""
    from nmt.models.build import build_model

    try:
        with shapes_only():
            shapes = build_model(model, tokenizer.src_vocab_size, tokenizer.tgt_vocab_size,
                                 joint_vocab=tokenizer.joint)
            saved = set(shapes.state_dict())
            return _tensor_bytes([*shapes.parameters(),
                                  *(b for name, b in shapes.named_buffers() if name in saved)])
    except (ConfigError, RuntimeError, ValueError, OverflowError) as e:
        raise CheckpointError(f"{where}: cannot build its model ({first_line(e)})") from None


def _size(n: float) -> str:
    """Bytes for people: "3.0 KiB", "2,048.0 GiB"."""
    for unit in ("bytes", "KiB", "MiB"):
        if n < 1024:
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} GiB"


def _build_for(path: Path, cfg: Config, vocab: dict[str, Any],
               state: dict[str, torch.Tensor]) -> EncoderDecoder:
    """The model ``cfg`` describes, built for real only once :func:`check_weights` passes."""
    from nmt.models.build import build_model

    check_weights(path, cfg, vocab, state)
    return build_model(cfg.model, vocab["src"], vocab["tgt"], joint_vocab=vocab["joint"])
