"""The checkpoint format: self-describing, written atomically, loaded with ``weights_only=True``.

A checkpoint is one dict of plain values and tensors (never a pickled module)::

    {"format": FORMAT, "config": Config.to_dict(), "vocab": {"src": int, "tgt": int, "joint": bool},
     "model": state_dict, "optimizer": ..., "scheduler": ..., "rng": ..., "progress": {...}}

so loading rebuilds the model from its own config without guessing (:mod:`nmt.loading`).
:func:`load_checkpoint` checks every record and the layout before handing it out;
:func:`rng_state` and :func:`set_rng_state` carry the random generators across a resume.
"""

from __future__ import annotations

import math
import pickle
import random
import sys
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch

from nmt.errors import CheckpointError, first_line, os_reason
from nmt.files import atomic_write_bytes, remove_stale_temp_files

FORMAT = "nmt-checkpoint-1"


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` (see module docstring) atomically to ``path``.

    Temporary files of this name left by an earlier process (killed during a write, so it could
    not clean up) are removed first; a running process never leaves one behind.
    """
    remove_stale_temp_files(path)
    payload = {"format": FORMAT, **payload}
    atomic_write_bytes(path, lambda f: torch.save(payload, f))


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
        f = open(path, "rb")  # noqa: SIM115 - closed by the with block below
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read ({os_reason(e)})") from None
    try:
        with f:
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
        reason = first_line(e).split(". ")[0]  # torch's first sentence says what failed
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


@dataclass(frozen=True)
class Field:
    """What one checkpoint value may be: its type (``int`` excludes ``bool``; ``float`` also
    takes an int) and, for numbers, its range (NaN is never in one)."""

    kind: type
    least: float = -math.inf
    most: float = math.inf

    def check(self, value: Any) -> str:
        """"" when ``value`` fits, else what was expected."""
        if self.kind is int:
            ok = _is_int(value)
        elif self.kind is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        else:
            ok = isinstance(value, self.kind)
        if not ok:
            return f"expected {self.kind.__name__}, got {type(value).__name__}"
        if self.kind not in (int, float):
            return ""
        if not math.isfinite(value) and not (value == self.least == -math.inf
                                             or value == self.most == math.inf):
            return f"expected a finite number, got {value!r}"
        if value < self.least:
            return f"expected at least {self.least}, got {value!r:.40}"
        if value > self.most:
            return f"expected at most {self.most}, got {value!r:.40}"
        return ""


COUNT = Field(int, 0, 2**62)  # steps, tokens, epochs: never negative, never absurd
FINITE = sys.float_info.max

# The top-level entries of a checkpoint; ``True``: every checkpoint must have it. Entries not
# listed are ignored (a newer nmt may add some). Resuming also needs optimizer, scheduler, rng.
CHECKPOINT_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {
    "config": ((dict,), True),
    "vocab": ((dict,), True),
    "model": ((dict,), True),
    "optimizer": ((dict,), False),
    "scheduler": ((dict,), False),
    "rng": ((dict, list), False),  # a list: one state per process of a distributed run
    "progress": ((dict,), False),
    "ema": ((dict,), False),  # the weights' moving average (train.ema_decay > 0)
}

# ``progress`` (the training loop's Progress): every field optional (a checkpoint from before
# a field existed gets its default), none unknown.
PROGRESS_FIELDS: dict[str, Field] = {
    "step": COUNT,
    "epoch": COUNT,
    "batch_in_epoch": COUNT,
    "tokens": COUNT,
    "elapsed": Field(float, 0.0, FINITE),
    "best_score": Field(float, -math.inf, FINITE),  # -inf: nothing scored yet
    "best_loss": Field(float, 0.0, math.inf),  # inf: no validation loss yet
    "best_step": COUNT,
    "evals_since_best": COUNT,
    "last_eval_step": Field(int, -1, 2**62),  # -1: no validation yet
    "window_loss": Field(float, 0.0, FINITE),
    "window_tokens": COUNT,
    "finished": Field(bool),
    "stop_reason": Field(str),
}

# Relations between progress fields that any real run keeps: (field, at most this field, why).
PROGRESS_BOUNDS = (
    ("epoch", "step", "an epoch takes at least one step"),
    ("best_step", "step", "the best step was taken"),
    ("last_eval_step", "step", "the last validation was of a step taken"),
    ("batch_in_epoch", "tokens", "every batch holds a target token"),
    ("window_tokens", "tokens", "the tokens since the last log line were trained on"),
)


def check_progress(progress: Any) -> str:
    """"" when ``progress`` is a valid progress table, else what is wrong with it."""
    if not isinstance(progress, dict):
        return "expected a table"
    for key, value in progress.items():
        spec = PROGRESS_FIELDS.get(key)
        if spec is None:
            return f"{_plain(key)}: unknown field"
        problem = spec.check(value)
        if problem:
            return f"{key}: {problem}"
    for low, high, why in PROGRESS_BOUNDS:
        if low in progress and progress[low] > progress.get(high, 0):
            return f"{low}={progress[low]} is more than {high}={progress.get(high, 0)} ({why})"
    return ""


def _plain(key: Any) -> str:
    return key if isinstance(key, str) and key.isidentifier() else repr(key)[:40]


def _check_layout(path: Path, payload: dict[str, Any]) -> None:
    """Every entry :data:`CHECKPOINT_FIELDS` lists has the right type, ``vocab`` and ``model``
    the right layout and ``progress`` the types and ranges of :data:`PROGRESS_FIELDS`, so a
    crafted or foreign file fails here with one line, not later with a traceback."""
    def bad(what: str) -> CheckpointError:
        return CheckpointError(f"{path}: incompatible checkpoint ({what})")

    for key, (types, required) in CHECKPOINT_FIELDS.items():
        if key not in payload:
            if required:
                raise bad(f"{key}: missing")
        elif not isinstance(payload[key], types):
            raise bad(f"{key}: expected {' or '.join(t.__name__ for t in types)}, got "
                      f"{type(payload[key]).__name__}")
    vocab = payload["vocab"]
    if not (all(_is_int(vocab.get(k)) and 1 <= vocab[k] <= 2**31 for k in ("src", "tgt"))
            and isinstance(vocab.get("joint"), bool)):
        raise bad("vocab: expected {'src': int, 'tgt': int, 'joint': bool}")
    model = payload["model"]
    if not (model and all(isinstance(k, str) and isinstance(v, torch.Tensor)
                          for k, v in model.items())):
        raise bad("model: expected a table of named tensors")
    ema = payload.get("ema")
    if ema is not None and not (
            _is_int(ema.get("updates")) and ema["updates"] >= 0
            and isinstance(ema.get("weights"), dict) and ema["weights"].keys() == model.keys()
            and all(isinstance(v, torch.Tensor) for v in ema["weights"].values())):
        raise bad("ema: expected {'updates': int, 'weights': the model's named tensors}")
    problem = check_progress(payload.get("progress", {}))
    if problem:
        raise bad(f"progress: {problem}")


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
