"""Loading a trained run for inference: ``nmt translate``, ``bleu``, ``plot`` and ``export``.

:func:`load_run` rebuilds the model a checkpoint describes from its own config (checked against
the weights' names and shapes before anything is allocated), loads the run's tokenizer and
takes the weights' moving average when the run kept one. :func:`latest_run` and
:func:`resolve_checkpoint` turn ``--run`` and ``--checkpoint`` into files.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from nmt.checkpoint import load_checkpoint
from nmt.config import Config, from_dict
from nmt.errors import CheckpointError, ConfigError, NmtError, first_line
from nmt.run_dir import run_config

if TYPE_CHECKING:
    from nmt.data.tokenizers import Tokenizer
    from nmt.models.base import EncoderDecoder

RUNS_DIR = Path("runs")


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


def latest_run(runs_dir: Path = RUNS_DIR) -> Path:
    """The run directory under ``runs_dir`` whose checkpoint was written last."""
    candidates = [p.parent.parent for p in runs_dir.glob("*/checkpoints/last.pt")]
    if not candidates:
        raise CheckpointError(
            f"{runs_dir}: no trained run found (train one with `nmt train --config ...`, "
            "or name one with --run runs/NAME)"
        )
    return max(candidates, key=lambda p: (p / "checkpoints" / "last.pt").stat().st_mtime)


def resolve_checkpoint(run_dir: Path, checkpoint: str) -> Path:
    """``best`` (falls back to ``last`` when no validation has run), ``last``, or a file path."""
    if checkpoint in ("best", "last"):
        path = run_dir / "checkpoints" / f"{checkpoint}.pt"
        if checkpoint == "best" and not path.is_file():
            path = run_dir / "checkpoints" / "last.pt"
        if not path.is_file():
            raise CheckpointError(
                f"{run_dir}: no checkpoint {checkpoint}.pt in {run_dir}/checkpoints"
            )
        return path
    path = Path(checkpoint)
    if not path.is_file():
        raise CheckpointError(
            f"--checkpoint {checkpoint}: expected best, last or a checkpoint file"
        )
    return path


def load_run(
    run_dir: Path | None = None, checkpoint: str = "best", device: str | torch.device = "cpu",
    averaged: bool = True,
) -> LoadedRun:
    """Rebuild a trained model, its config and tokenizer from a run directory for inference.

    ``averaged``: a run trained with ``train.ema_decay`` translates with the weights' moving
    average (what validation chose ``best.pt`` by); False takes the trained weights as they are.
    """
    from nmt.data.tokenizers import load_tokenizer
    from nmt.device import resolve_device

    run_dir = latest_run() if run_dir is None else Path(run_dir)
    if not run_dir.is_dir():
        raise CheckpointError(f"--run {run_dir}: run directory not found")
    path = resolve_checkpoint(run_dir, checkpoint)
    dev = device if isinstance(device, torch.device) else resolve_device(device)
    payload = load_checkpoint(path)
    try:
        cfg = from_dict(payload["config"], where=str(path))
        vocab = payload["vocab"]
    except (KeyError, TypeError, ConfigError) as e:
        raise CheckpointError(f"{path}: incompatible checkpoint (bad config: {e})") from None
    if (run_dir / "config.toml").is_file() and run_dir / "checkpoints" in path.parents:
        cfg = run_config(run_dir, cfg)  # a hand edit of its [decode] counts, as on --resume
    try:
        tokenizer = load_tokenizer(run_dir / "tokenizer")
    except NmtError:
        raise
    except Exception as e:  # noqa: BLE001 - any unreadable tokenizer file is a user-facing error
        raise CheckpointError(f"{run_dir}/tokenizer: cannot load tokenizer "
                              f"({first_line(e)})") from None
    if (tokenizer.src_vocab_size, tokenizer.tgt_vocab_size) != (vocab["src"], vocab["tgt"]):
        raise CheckpointError(
            f"{path}: incompatible with {run_dir}/tokenizer (vocabulary sizes "
            f"{vocab['src']}/{vocab['tgt']} vs "
            f"{tokenizer.src_vocab_size}/{tokenizer.tgt_vocab_size})"
        )
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


DERIVED_BYTES = 64 * 2**20  # computed tables (not saved) a checkpoint may ask beyond its weights


def _unsaved_bytes(model: torch.nn.Module) -> int:
    """Bytes of the tensors ``model`` computes rather than loads (non-persistent buffers such as
    the sinusoidal position table), which a shape check against the file cannot bound."""
    saved = set(model.state_dict())
    return sum(b.numel() * b.element_size() for name, b in model.named_buffers()
               if name not in saved)


def _build_for(path: Path, cfg: Config, vocab: dict[str, Any],
               state: dict[str, torch.Tensor]) -> EncoderDecoder:
    """The model ``cfg`` describes, built for real only once its weight names and shapes match
    ``state``: a checkpoint whose config asks for a huge model fails here, before allocating."""
    from nmt.models import build_model

    def build() -> EncoderDecoder:
        return build_model(cfg.model, vocab["src"], vocab["tgt"], joint_vocab=vocab["joint"])

    try:
        with shapes_only():  # no memory, no initialisation
            shapes = build()
            expected = {k: tuple(v.shape) for k, v in shapes.state_dict().items()}
            derived = _unsaved_bytes(shapes)
    except (ConfigError, RuntimeError, ValueError, OverflowError) as e:
        raise CheckpointError(f"{path}: incompatible checkpoint ({first_line(e)})") from None
    saved = sum(v.numel() * v.element_size() for v in state.values())
    if derived > saved + DERIVED_BYTES:
        raise CheckpointError(
            f"{path}: incompatible checkpoint (its config asks for {derived / 2**20:,.0f} MiB "
            f"of tables that are not in the file, e.g. model.max_positions="
            f"{cfg.model.max_positions}; at most the size of its weights plus "
            f"{DERIVED_BYTES // 2**20} MiB is allowed)"
        )
    found = {k: tuple(v.shape) for k, v in state.items()}
    if expected != found:
        diff = sorted(set(expected.items()) ^ set(found.items()))[0][0]
        raise CheckpointError(
            f"{path}: incompatible checkpoint (its weights do not match its config: {diff} is "
            f"{found.get(diff, 'missing')}, expected {expected.get(diff, 'absent')})"
        )
    return build()
