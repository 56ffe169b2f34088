"""Self-describing checkpoints, written atomically and loaded with ``weights_only=True``.

A checkpoint is one dict of plain values and tensors (never a pickled module)::

    {"format": FORMAT, "config": Config.to_dict(), "vocab": {"src": int, "tgt": int, "joint": bool},
     "model": state_dict, "optimizer": ..., "scheduler": ..., "rng": ..., "progress": {...}}

so loading rebuilds the model from its own config without guessing. A run directory holds
``config.toml``, ``tokenizer/``, ``metrics.jsonl``, ``train.log`` and
``checkpoints/{last,best}.pt``.
"""

from __future__ import annotations

import glob
import os
import pickle
import random
import tempfile
import time
import warnings
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO

import numpy as np
import torch

from nmt.config import Config, from_dict, load_config
from nmt.errors import CheckpointError, ConfigError, NmtError

if TYPE_CHECKING:
    from nmt.data.tokenizers import Tokenizer
    from nmt.models.base import EncoderDecoder

FORMAT = "nmt-checkpoint-1"
RUNS_DIR = Path("runs")
TMP_SUFFIX = ".tmp"  # temporary files are ".NAME.XXXX.tmp": hidden, never "*.pt"


def atomic_write_bytes(path: Path, write: Any) -> None:
    """Call ``write(fileobj)`` on a temporary file beside ``path``, fsync, then rename over it.

    A crash at any moment leaves either the old file or the new one, never a partial file: the
    temporary file (``.NAME.XXXX.tmp``, hidden and not ending in ``.pt``) is removed on any
    failure, and a failure to write (disk full, read-only directory) is a one-line
    :class:`NmtError` naming ``path``; the old file is left as it was.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TMP_SUFFIX, dir=path.parent)
    except OSError as e:
        raise NmtError(f"{path}: cannot write ({_os_reason(e)})") from None
    _mode_like_open(fd, path)
    raw = os.fdopen(fd, "wb")
    f = _RecordingWriter(raw)
    try:
        with raw:
            write(f)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        with suppress(OSError):
            os.unlink(tmp)
        # torch.save turns whatever its write raised (ENOSPC, even Ctrl-C) into a RuntimeError
        cause = e if isinstance(e, OSError) else f.error
        if cause is not None and not isinstance(cause, Exception):
            raise cause from None  # KeyboardInterrupt stays an interruption
        if isinstance(e, Exception) and isinstance(cause, OSError):
            raise NmtError(f"{path}: cannot write ({_os_reason(cause)}); the previous "
                           "file, if any, is unchanged") from None
        raise
    with suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # the rename itself survives a power cut
        finally:
            os.close(dir_fd)


class _RecordingWriter:
    """A binary file wrapper that remembers what a write raised."""

    def __init__(self, f: BinaryIO) -> None:
        self._f = f
        self.error: BaseException | None = None

    def write(self, data: Any) -> int:
        try:
            return self._f.write(data)
        except BaseException as e:
            self.error = e
            raise

    def flush(self) -> None:
        self._f.flush()

    def fileno(self) -> int:
        return self._f.fileno()


def _mode_like_open(fd: int, path: Path) -> None:
    """Give the temporary file (mkstemp makes it 0600) the permissions ``open(path, "w")``
    would: those of the file it replaces, or 0666 less the umask."""
    try:
        mode = path.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    with suppress(OSError):
        os.fchmod(fd, mode)


def _os_reason(e: OSError) -> str:
    return e.strerror or str(e) or type(e).__name__


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, lambda f: f.write(text.encode("utf-8")))


@contextmanager
def atomic_text_output(path: Path) -> Iterator[TextIO]:
    """A UTF-8 text file to stream into, renamed over ``path`` only when the block succeeds.

    A failure or interruption midway (bad input line, Ctrl-C, full disk) leaves ``path`` as it
    was instead of half written. Paths that are not regular files (``/dev/stdout``, a named
    pipe) are written directly. Opening raises ``OSError`` so callers can name their option.
    """
    if path.exists() and not path.is_file():
        with path.open("w", encoding="utf-8", newline="\n") as f:
            yield f
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TMP_SUFFIX, dir=path.parent)
    _mode_like_open(fd, path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` (see module docstring) atomically to ``path``.

    Temporary files of this name left by an earlier process (killed during a write, so it could
    not clean up) are removed first; a running process never leaves one behind.
    """
    _remove_stale_temp_files(path)
    payload = {"format": FORMAT, **payload}
    atomic_write_bytes(path, lambda f: torch.save(payload, f))


_STARTED = time.time()  # temporary files older than this process are not being written by it


def _remove_stale_temp_files(path: Path) -> None:
    for tmp in path.parent.glob(f".{glob.escape(path.name)}.*{TMP_SUFFIX}"):
        with suppress(OSError):
            if tmp.stat().st_mtime < _STARTED:
                tmp.unlink()


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint safely: tensors and plain containers only, never arbitrary code.

    Only the zip format ``torch.save`` writes is accepted (a bare or legacy pickle is refused
    before anything is unpickled). The file is opened once; the CRC-32 of every record is
    checked before unpickling (PyTorch itself does not, so a flipped bit in the weights would
    load silently), then the payload's layout is checked. Every failure is a one-line
    :class:`CheckpointError`.
    """
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint not found")
    try:
        with open(path, "rb") as f:
            # one open file: a concurrent atomic rename cannot swap what is checked and loaded
            _check_records(path, f)
            f.seek(0)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # e.g. "Detected pickle protocol 4": noise here
                payload = torch.load(f, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        raise CheckpointError(
            f"{path}: refused to load: it holds objects other than tensors and plain values, "
            f"which could run code when unpickled ({_unpickling_reason(e)}); nmt only loads "
            "weights_only checkpoints"
        ) from None
    except CheckpointError:
        raise
    except Exception as e:  # noqa: BLE001 - crafted records fail inside torch in many ways
        reason = str(e).strip().splitlines()[0].split(". ")[0][:160] if str(e).strip() else (
            type(e).__name__)
        raise CheckpointError(f"{path}: corrupt or truncated checkpoint ({reason})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an nmt checkpoint (expected format {FORMAT!r})")
    _check_layout(path, payload)
    return payload


ZIP_MAGIC = b"PK\x03\x04"


def _check_records(path: Path, f: BinaryIO) -> None:
    """Refuse what is not a whole zip archive, and any record failing its CRC-32."""
    head = f.read(len(ZIP_MAGIC))
    if not head:
        raise EOFError("empty file")
    if head != ZIP_MAGIC:
        raise CheckpointError(f"{path}: not an nmt checkpoint (expected the zip archive "
                              "torch.save writes; bare or legacy pickles are not loaded)")
    f.seek(0)
    if not zipfile.is_zipfile(f):
        raise zipfile.BadZipFile("the end of the archive is missing")
    f.seek(0)
    with zipfile.ZipFile(f) as z:
        bad = z.testzip()
    if bad is not None:
        raise zipfile.BadZipFile(f"record {bad} fails its CRC-32 check")


def _unpickling_reason(e: Exception) -> str:
    """The informative line of a weights-only refusal (torch wraps it in generic advice)."""
    boilerplate = ("Weights only load failed", "Please file an issue", "Check the documentation",
                   "In PyTorch", "Re-running")
    for line in str(e).splitlines():
        line = line.strip()
        if line and not line.startswith(boilerplate):
            return line[:160]
    return "unsupported content"


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _check_layout(path: Path, payload: dict[str, Any]) -> None:
    """What :func:`load_run` and resuming read must have the right types (a crafted or foreign
    file must not fail later with a traceback)."""
    def bad(what: str) -> CheckpointError:
        return CheckpointError(f"{path}: incompatible checkpoint ({what})")

    if not isinstance(payload.get("config"), dict):
        raise bad("config: expected a table of sections")
    vocab = payload.get("vocab")
    if not (isinstance(vocab, dict) and all(_is_int(vocab.get(k)) and vocab[k] >= 1
                                            for k in ("src", "tgt"))
            and isinstance(vocab.get("joint"), bool)):
        raise bad("vocab: expected {'src': int, 'tgt': int, 'joint': bool}")
    model = payload.get("model")
    if not (isinstance(model, dict) and model and all(
            isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in model.items())):
        raise bad("model: expected a table of named tensors")
    ema = payload.get("ema")
    if ema is not None and not (
            isinstance(ema, dict) and _is_int(ema.get("updates")) and ema["updates"] >= 0
            and isinstance(ema.get("weights"), dict) and ema["weights"].keys() == model.keys()
            and all(isinstance(v, torch.Tensor) for v in ema["weights"].values())):
        raise bad("ema: expected {'updates': int, 'weights': the model's named tensors}")
    progress = payload.get("progress", {})
    if not (isinstance(progress, dict) and _is_int(progress.get("step", 0))):
        raise bad("progress: expected a table with an integer step")


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
    weights, kind = payload["model"], "trained"
    if isinstance(payload.get("ema"), dict) and "weights" in payload["ema"]:
        kind = "averaged" if averaged else "raw"
        if averaged:
            weights = payload["ema"]["weights"]
    model = _build_for(path, cfg, vocab, weights)
    try:
        model.load_state_dict(weights)
    except (RuntimeError, KeyError) as e:
        first = str(e).strip().splitlines()[0][:200]
        raise CheckpointError(f"{path}: incompatible checkpoint ({first})") from None
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


def _build_for(path: Path, cfg: Config, vocab: dict[str, Any],
               state: dict[str, torch.Tensor]) -> EncoderDecoder:
    """The model ``cfg`` describes, built for real only once its weight names and shapes match
    ``state``: a checkpoint whose config asks for a huge model fails here, before allocating."""
    from nmt.models import build_model

    def build() -> EncoderDecoder:
        return build_model(cfg.model, vocab["src"], vocab["tgt"], joint_vocab=vocab["joint"])

    try:
        with shapes_only():  # no memory, no initialisation
            expected = {k: tuple(v.shape) for k, v in build().state_dict().items()}
    except (ConfigError, RuntimeError, ValueError, OverflowError) as e:
        first = str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__
        raise CheckpointError(f"{path}: incompatible checkpoint ({first})") from None
    found = {k: tuple(v.shape) for k, v in state.items()}
    if expected != found:
        diff = sorted(set(expected.items()) ^ set(found.items()))[0][0]
        raise CheckpointError(
            f"{path}: incompatible checkpoint (its weights do not match its config: {diff} is "
            f"{found.get(diff, 'missing')}, expected {expected.get(diff, 'absent')})"
        )
    return build()
