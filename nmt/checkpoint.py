"""Self-describing checkpoints, written atomically and loaded with ``weights_only=True``.

A checkpoint is one dict of plain values and tensors (never a pickled module)::

    {"format": FORMAT, "config": Config.to_dict(), "vocab": {"src": int, "tgt": int, "joint": bool},
     "model": state_dict, "optimizer": ..., "scheduler": ..., "rng": ..., "progress": {...}}

so loading rebuilds the model from its own config without guessing. A run directory holds
``config.toml``, ``tokenizer/``, ``metrics.jsonl``, ``train.log`` and
``checkpoints/{last,best}.pt``.
"""

from __future__ import annotations

import os
import pickle
import random
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from nmt.config import Config, from_dict, load_config
from nmt.errors import CheckpointError, ConfigError, NmtError

if TYPE_CHECKING:
    from nmt.data.tokenizers import Tokenizer
    from nmt.models.base import EncoderDecoder

FORMAT = "nmt-checkpoint-1"
RUNS_DIR = Path("runs")


def atomic_write_bytes(path: Path, write: Any) -> None:
    """Call ``write(fileobj)`` on a temporary file beside ``path``, fsync, then rename over it.

    A crash at any moment leaves either the old file or the new one, never a partial file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with _suppress():
            os.unlink(tmp)
        raise
    with _suppress():
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return exc[0] is not None and issubclass(exc[0], OSError)  # type: ignore[arg-type]


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, lambda f: f.write(text.encode("utf-8")))


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` (see module docstring) atomically to ``path``."""
    payload = {"format": FORMAT, **payload}
    atomic_write_bytes(path, lambda f: torch.save(payload, f))


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint safely: tensors and plain containers only, never arbitrary code."""
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint not found")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else "unsupported content"
        raise CheckpointError(
            f"{path}: refused to load: it holds objects other than tensors and plain values "
            f"(only weights_only checkpoints are trusted): {first[:200]}"
        ) from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError, ValueError) as e:
        reason = str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__
        raise CheckpointError(f"{path}: corrupt or truncated checkpoint ({reason})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an nmt checkpoint (expected format {FORMAT!r})")
    return payload


def rng_state() -> dict[str, Any]:
    """Every random generator training uses, as plain values and tensors (weights_only-safe)."""
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": [t if not isinstance(t, np.ndarray) else torch.from_numpy(t.copy())
                  for t in np.random.get_state()],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(_to_tuple(state["python"]))
    np_state = [t.numpy() if isinstance(t, torch.Tensor) else t for t in state["numpy"]]
    np.random.set_state(tuple(np_state))  # type: ignore[arg-type]
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _to_tuple(x: Any) -> Any:
    return tuple(_to_tuple(v) for v in x) if isinstance(x, (list, tuple)) else x



@dataclass
class LoadedRun:
    run_dir: Path
    config: Config
    model: EncoderDecoder  # in eval mode, on `device`
    tokenizer: Tokenizer
    checkpoint_path: Path
    step: int
    device: torch.device


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
    run_dir: Path | None = None, checkpoint: str = "best", device: str | torch.device = "cpu"
) -> LoadedRun:
    """Rebuild a trained model, its config and tokenizer from a run directory for inference."""
    from nmt.data.tokenizers import load_tokenizer
    from nmt.device import resolve_device
    from nmt.models import build_model

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
        load_config(run_dir / "config.toml")  # a hand-edited, broken config is reported early
    try:
        tokenizer = load_tokenizer(run_dir / "tokenizer")
    except NmtError:
        raise
    except Exception as e:  # noqa: BLE001 - any unreadable tokenizer file is a user-facing error
        raise CheckpointError(f"{run_dir}/tokenizer: cannot load tokenizer ({e})") from None
    if (tokenizer.src_vocab_size, tokenizer.tgt_vocab_size) != (vocab["src"], vocab["tgt"]):
        raise CheckpointError(
            f"{path}: incompatible with {run_dir}/tokenizer (vocabulary sizes "
            f"{vocab['src']}/{vocab['tgt']} vs "
            f"{tokenizer.src_vocab_size}/{tokenizer.tgt_vocab_size})"
        )
    model = build_model(cfg.model, vocab["src"], vocab["tgt"], joint_vocab=bool(vocab["joint"]))
    try:
        model.load_state_dict(payload["model"])
    except (RuntimeError, KeyError) as e:
        first = str(e).strip().splitlines()[0][:200]
        raise CheckpointError(f"{path}: incompatible checkpoint ({first})") from None
    model.to(dev).eval()
    step = int(payload.get("progress", {}).get("step", 0))
    return LoadedRun(run_dir, cfg, model, tokenizer, path, step, dev)
