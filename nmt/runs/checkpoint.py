"""The checkpoint format: self-describing, written atomically, loaded with ``weights_only=True``.

Long for a reason: the format and every check a file from elsewhere must pass are one contract.

A checkpoint is one dict of plain values and tensors (never a pickled module)::

    {"format": FORMAT, "config": Config.to_dict(),
     "vocab": {"src": int, "tgt": int, "joint": bool, "digest": str},
     "model": state_dict, "optimizer": ..., "scheduler": ..., "rng": ..., "progress": {...}}

so loading rebuilds the model from its own config without guessing (:mod:`nmt.runs.loading`).
:func:`load_checkpoint` checks every record and the layout before handing it out;
:func:`check_tokenizer` refuses a tokenizer other than the one the weights were trained with
(``vocab["digest"]``, :meth:`nmt.data.tokenizers.Tokenizer.digest`; checkpoints written before
it existed are compared by vocabulary sizes); :func:`rng_state` and :func:`set_rng_state` carry
the random generators across a resume.
"""

from __future__ import annotations

import math
import pickle
import random
import re
import sys
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np
import torch

from nmt.errors import CheckpointError, first_line, shown
from nmt.files import atomic_write_bytes, open_stored, path_problem

if TYPE_CHECKING:
    from nmt.data.tokenizers import Tokenizer

FORMAT = "nmt-checkpoint-1"


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` (see module docstring) atomically to ``path``.

    Temporary files of this name that a killed writer left are removed first
    (:func:`nmt.files.atomic_write_bytes`); a running writer's is not.
    """
    payload = {"format": FORMAT, **payload}
    atomic_write_bytes(path, lambda f: torch.save(payload, f))


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu", *,
                    mmap: bool = False, folder: Path | None = None) -> dict[str, Any]:
    """Load a checkpoint safely: tensors and plain containers only, never arbitrary code.

    Only the zip format ``torch.save`` writes is accepted (a bare or legacy pickle is refused
    before anything is unpickled). The file is opened once; its records are checked to lie one
    after another inside the file, and the CRC-32 of every record is checked before unpickling
    (PyTorch itself does not, so a flipped bit in the weights would load silently), then the
    payload's layout is checked. Every failure is a one-line :class:`CheckpointError`.

    ``mmap``: map the tensors instead of reading them (``nmt runs``, which needs the config,
    the progress and the weights' shapes, not their values): their records are then not read,
    so their CRC-32 is not checked; everything else is. ``folder``: the run the checkpoint is
    a file of (a link out of it is refused, :func:`nmt.files.open_stored`); None for a file the
    user named.
    """
    problem = path_problem(path, called="checkpoint")
    if problem:
        raise CheckpointError(f"{path}: {problem}")
    f = open_stored(path, folder, CheckpointError)
    try:
        with f:
            # one open file: a concurrent atomic rename cannot swap what is checked and loaded
            _check_records(path, f, tensors=not mmap)
            f.seek(0)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # e.g. "Detected pickle protocol 4": noise here
                payload = torch.load(_same_file(path, f) if mmap else f,
                                     map_location=map_location, weights_only=True, mmap=mmap)
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


def _same_file(path: Path, f: BinaryIO) -> str:
    """A name for the file ``f`` has open (torch memory-maps only named files): its
    ``/proc/self/fd`` entry where there is one, so that a rename over ``path`` since it was
    opened cannot swap the file; else ``path``."""
    fd_path = Path(f"/proc/self/fd/{f.fileno()}")
    return str(fd_path) if fd_path.exists() else str(path)


ZIP_MAGIC = b"PK\x03\x04"
LOCAL_HEADER = 30  # bytes of a zip record's local header before its name and extra field
TENSOR_RECORD = re.compile(r"[^/]+/data/\d+")  # where torch.save puts a tensor's bytes


def _check_records(path: Path, f: BinaryIO, tensors: bool = True) -> None:
    """Refuse what is not a whole zip archive of records that lie one after another, and any
    record failing its CRC-32 (records holding tensors only when ``tensors``)."""
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
        records = z.infolist()
        _check_extents(records, f)
        for info in records:
            if tensors or not TENSOR_RECORD.fullmatch(info.filename):
                _check_crc(z, info)


def _check_crc(z: zipfile.ZipFile, info: zipfile.ZipInfo) -> None:
    """Read one record to its end, which checks its CRC-32 (as ``ZipFile.testzip`` does)."""
    try:
        with z.open(info) as record:
            while record.read(2**20):
                pass
    except zipfile.BadZipFile as e:
        what = "fails its CRC-32 check" if "CRC" in str(e) else f"is damaged ({e})"
        raise zipfile.BadZipFile(f"record {info.filename} {what}") from None


def _check_extents(records: list[zipfile.ZipInfo], f: BinaryIO) -> None:
    """Every record (local header and data) lies inside the file and after the one before, and
    the records unpack to at most the file's size (``torch.save`` stores them uncompressed).
    A crafted archive listing one record many times, or overlapping records, would otherwise
    have every copy unpacked and CRC-checked (a 2 MB file can list 200 GB)."""
    size = f.seek(0, 2)
    unpacked = sum(info.file_size for info in records)
    if unpacked > size:
        raise zipfile.BadZipFile(f"its records unpack to {unpacked:,} bytes, more than the "
                                 f"file's {size:,} (torch.save stores records uncompressed)")
    end, previous = 0, ""
    for info in sorted(records, key=lambda i: i.header_offset):
        if info.header_offset < end:
            raise zipfile.BadZipFile(f"record {info.filename} overlaps record {previous}")
        f.seek(info.header_offset + LOCAL_HEADER - 4)
        lengths = f.read(4)  # the local header's name and extra field lengths
        if len(lengths) < 4:
            raise zipfile.BadZipFile(f"record {info.filename} lies beyond the end of the file")
        name_len, extra_len = int.from_bytes(lengths[:2], "little"), int.from_bytes(lengths[2:],
                                                                                    "little")
        end = info.header_offset + LOCAL_HEADER + name_len + extra_len + info.compress_size
        if end > size:
            raise zipfile.BadZipFile(f"record {info.filename} lies beyond the end of the file")
        previous = info.filename


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
            return f"expected at least {self.least}, got {shown(value, 40)}"
        if value > self.most:
            return f"expected at most {self.most}, got {shown(value, 40)}"
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

# ``progress`` (the training loop's nmt.training.state.Progress, which imports this module, so the
# names and types are listed here again; tests/test_reliability_checkpoints.py ties the two):
# every field optional (a checkpoint from before a field existed gets its default), none unknown.
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
    return key if isinstance(key, str) and key.isidentifier() else shown(key, 40)


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
    if "digest" in vocab and not (isinstance(vocab["digest"], str)
                                  and re.fullmatch(r"[0-9a-f]{64}", vocab["digest"])):
        raise bad("vocab: digest: expected 64 hexadecimal digits (a SHA-256)")
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


def check_dense(path: Path, what: str, tensor: torch.Tensor) -> None:
    """Refuse a tensor whose storage is smaller than its shape: a zero-stride or overlapping
    view such as ``torch.zeros(1).expand(n, m)``. Saved weights and optimizer moments hold
    every one of their elements; a shape check alone would take such a view for a large weight
    (and a large model to build), and kernels that write into it in place may crash."""
    have = tensor.untyped_storage().nbytes() - tensor.storage_offset() * tensor.element_size()
    if tensor.numel() * tensor.element_size() > have:
        raise CheckpointError(f"{path}: incompatible checkpoint ({what} of shape "
                              f"{tuple(tensor.shape)} holds only {max(have, 0):,} bytes: saved "
                              "tensors hold every element)")


def check_optimizer_state(path: Path, optimizer: torch.optim.Optimizer) -> None:
    """After ``optimizer.load_state_dict``: every moment it restored has the shape of its
    parameter and holds all of its elements (torch checks neither, and its fused Adam reads and
    writes past the end of a smaller one: a crash, not an error)."""
    for group in optimizer.param_groups:
        for i, param in enumerate(group["params"]):
            for key, value in optimizer.state.get(param, {}).items():
                if not isinstance(value, torch.Tensor) or (key == "step" and value.dim() == 0):
                    continue
                if value.shape != param.shape:
                    raise CheckpointError(
                        f"{path}: incompatible checkpoint (optimizer {key} of parameter {i} has "
                        f"shape {tuple(value.shape)}, expected {tuple(param.shape)})")
                check_dense(path, f"optimizer {key} of parameter {i}", value)


def vocab_entry(tokenizer: Tokenizer) -> dict[str, Any]:
    """A checkpoint's ``vocab``: the vocabulary sizes the model is built with, and the identity
    of the tokenizer whose ids it is trained on (see :func:`check_tokenizer`)."""
    return {"src": tokenizer.src_vocab_size, "tgt": tokenizer.tgt_vocab_size,
            "joint": tokenizer.joint, "digest": tokenizer.digest()}


def check_tokenizer(path: Path, vocab: dict[str, Any], tokenizer: Tokenizer, where: str,
                    advice: str = "use the checkpoint with the run it was trained in") -> None:
    """Refuse ``tokenizer`` (read from ``where``) for the checkpoint at ``path`` unless it is
    the one the weights were trained with: the same vocabulary sizes and, when the checkpoint
    records it (those written before it did are compared by size only), the same digest. A
    tokenizer of the same size but other pieces would make a model translate into garbage, or
    go on training on ids that mean other pieces. The message ends in ``advice``."""
    sizes = (tokenizer.src_vocab_size, tokenizer.tgt_vocab_size)
    if sizes != (vocab["src"], vocab["tgt"]):
        raise CheckpointError(f"{path}: incompatible with {where} (vocabulary sizes "
                              f"{vocab['src']}/{vocab['tgt']} vs {sizes[0]}/{sizes[1]})")
    if "digest" in vocab and vocab["digest"] != tokenizer.digest():
        raise CheckpointError(
            f"{path}: incompatible with {where} (trained with another tokenizer of the same "
            f"size: vocabulary digest {vocab['digest'][:12]} vs {tokenizer.digest()[:12]}); "
            f"{advice}")


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
