"""Untrusted and damaged checkpoints, and checkpoint writes that fail or are killed midway.

A checkpoint is a file users download and share, so loading it must never run code, and a
damaged one must be a one-line error through the CLI, never a traceback or silently wrong
weights. Writing one must leave the previous file loadable whatever happens during the write.
"""

from __future__ import annotations

import copy
import errno
import io
import os
import pickle
import random
import shlex
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import invoke
from test_decode import make_run

import nmt.files as files
import nmt.runs.checkpoint as ckpt
from nmt.errors import CheckpointError, NmtError
from nmt.files import atomic_write_bytes
from nmt.runs.checkpoint import load_checkpoint, save_checkpoint

ROOT = Path(__file__).resolve().parent.parent


def one_line_error(code: int, err: str) -> str:
    """The CLI failed with exactly one line on stderr and no traceback; returns that line."""
    assert code != 0
    assert "Traceback" not in err and err.strip().count("\n") == 0, err
    return err.strip()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("runs") / "toy", trained=False)


@pytest.fixture(scope="module")
def good_payload(run_dir: Path) -> dict[str, Any]:
    return load_checkpoint(run_dir / "checkpoints" / "last.pt")


def translate_with(run_dir: Path, checkpoint: Path) -> tuple[int, str, str]:
    return invoke("translate", "--run", str(run_dir), "--checkpoint", str(checkpoint),
                  "--device", "cpu", "a b")


# --- checkpoints that would run code ------------------------------------------------------------


class _RunsShell:
    """Unpickling this runs a shell command (what a malicious checkpoint does)."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[str]]:
        return (os.system, (self.command,))


def _evil_file(directory: Path, marker: Path, kind: str) -> Path:
    command = f"touch {shlex.quote(str(marker))}"
    payload = {"format": ckpt.FORMAT, "config": {}, "model": _RunsShell(command)}
    path = directory / f"evil-{kind}.pt"
    if kind == "zip":  # the format torch.save writes today
        torch.save(payload, path)
    elif kind == "legacy":  # torch's format before 1.6
        torch.save(payload, path, _use_new_zipfile_serialization=False)
    else:  # a bare pickle
        path.write_bytes(pickle.dumps(payload))
    return path


def _unpickle_fully(path: Path) -> None:
    if path.name == "evil-pickle.pt":
        pickle.loads(path.read_bytes())
    else:
        torch.load(path, weights_only=False)


@pytest.mark.parametrize(("kind", "needle"), [
    ("zip", "refused to load: it holds objects other than tensors and plain values, which could "
            "run code when unpickled (Trying to load unsupported GLOBAL"),
    ("legacy", "not an nmt checkpoint (expected the zip archive torch.save writes"),
    ("pickle", "not an nmt checkpoint (expected the zip archive torch.save writes"),
], ids=["zip", "legacy", "pickle"])
def test_checkpoint_that_would_run_code_is_refused(run_dir: Path, tmp_path: Path, kind: str,
                                                   needle: str) -> None:
    marker = tmp_path / "pwned"
    evil = _evil_file(tmp_path, marker, kind)
    _unpickle_fully(evil)  # the file really is malicious: a full unpickle runs the command
    assert marker.exists()
    marker.unlink()

    code, _, err = translate_with(run_dir, evil)
    line = one_line_error(code, err)
    assert f"{evil}: {needle}" in line
    assert "weights_only` set to `False`" not in line  # torch's advice is not passed on
    assert not marker.exists()
    with pytest.raises(CheckpointError):
        load_checkpoint(evil)
    assert not marker.exists()


# --- damaged checkpoints ------------------------------------------------------------------------


def _data_offset(path: Path) -> int:
    """Byte offset, in the file, of the middle of the largest tensor record of a checkpoint."""
    with zipfile.ZipFile(path) as z:
        # tensor records are ARCHIVE/data/N; data.pkl may be larger in a tiny model's file
        info = max((i for i in z.infolist() if "/data/" in i.filename),
                   key=lambda i: i.file_size)
    with open(path, "rb") as f:
        f.seek(info.header_offset + 26)
        name_len, extra_len = int.from_bytes(f.read(2), "little"), int.from_bytes(f.read(2),
                                                                                  "little")
    return info.header_offset + 30 + name_len + extra_len + info.file_size // 2


def _damage(good: bytes, how: str, offset: int) -> bytes:
    if how == "empty":
        return b""
    if how == "truncated":
        return good[: len(good) // 2]
    if how == "last byte missing":
        return good[:-1]
    if how == "junk":
        return random.Random(0).randbytes(len(good))
    if how == "text file":
        return b"this is not a checkpoint\n"
    assert how == "flipped bit"
    damaged = bytearray(good)
    damaged[offset] ^= 0x10
    return bytes(damaged)


@pytest.mark.parametrize("how", ["empty", "truncated", "last byte missing", "junk", "text file",
                                 "flipped bit"])
def test_damaged_checkpoint_is_a_one_line_error(run_dir: Path, tmp_path: Path, how: str) -> None:
    source = run_dir / "checkpoints" / "last.pt"
    damaged = tmp_path / "damaged.pt"
    damaged.write_bytes(_damage(source.read_bytes(), how, _data_offset(source)))
    code, out, err = translate_with(run_dir, damaged)
    line = one_line_error(code, err)
    assert out == ""
    assert f"{damaged}: " in line
    if how in ("junk", "text file"):
        assert "not an nmt checkpoint (expected the zip archive" in line
    else:
        assert "corrupt or truncated checkpoint" in line
    if how == "empty":
        assert line.endswith("(empty file)")
    if how == "flipped bit":
        # torch alone would load these weights silently; the record's CRC-32 catches them
        torch.load(damaged, weights_only=True)
        assert "CRC-32" in line


def _mutate(payload: dict[str, Any], change: str) -> Any:
    p = copy.deepcopy(payload)
    model = p["model"]
    if change == "not a dict":
        return torch.zeros(3)
    if change == "no format":
        del p["format"]
    elif change == "vocab missing a size":
        p["vocab"] = {"tgt": 14, "joint": True}
    elif change == "vocab is a list":
        p["vocab"] = [14, 14]
    elif change == "progress is a list":
        p["progress"] = [200]
    elif change == "step is text":
        p["progress"] = {"step": "two hundred"}
    elif change == "model is a list":
        p["model"] = list(model.values())
    elif change == "config not a table":
        p["config"] = "transformer"
    elif change == "config invalid":
        p["config"]["model"]["dropout"] = 3.0
    elif change == "weights cut":
        p["model"] = {k: v[..., :1] if v.dim() else v for k, v in model.items()}
    elif change == "weight missing":
        p["model"].pop(next(iter(model)))
    elif change == "huge model in config":
        p["config"]["model"]["d_ff"] = 2**20  # would allocate 256 GB
        p["config"]["model"]["n_layers"] = 1000
    elif change.startswith("max_positions"):  # a computed table, not in the file
        p["config"]["model"]["max_positions"] = int(float(change.split()[1]))
    elif change == "d_ff beyond its range":
        p["config"]["model"]["d_ff"] = 2**40
    elif change.startswith("progress "):  # "progress FIELD VALUE"
        _, key, value = change.split(" ", 2)
        p["progress"][key] = eval(value)  # noqa: S307 - the test's own literals
    elif change == "optimizer is a list":
        p["optimizer"] = [1, 2]
    elif change == "NaN weights":
        name = next(k for k, v in model.items() if v.is_floating_point())
        p["model"][name] = model[name].clone().fill_(float("nan"))
    return p


CRAFTED = [  # what is changed in a good payload, and what the error says
    ("not a dict", "not an nmt checkpoint"),
    ("no format", "not an nmt checkpoint"),
    ("vocab missing a size", "incompatible checkpoint (vocab"),
    ("vocab is a list", "incompatible checkpoint (vocab"),
    ("progress is a list", "incompatible checkpoint (progress"),
    ("step is text", "incompatible checkpoint (progress"),
    ("model is a list", "incompatible checkpoint (model"),
    ("config not a table", "incompatible checkpoint (config"),
    ("config invalid", "model.dropout"),
    ("weights cut", "do not match its config"),
    ("weight missing", "do not match its config"),
    ("huge model in config", "do not match its config"),
    ("max_positions 2e6", "tables that are not in the file, e.g. model.max_positions=2000000"),
    ("max_positions 1e9", "tables that are not in the file, e.g. model.max_positions="),
    ("d_ff beyond its range", "model.d_ff: expected at most 2147483647"),
    ("progress epoch 'x'", "incompatible checkpoint (progress: epoch: expected int, got str)"),
    ("progress elapsed None", "(progress: elapsed: expected float, got NoneType)"),
    ("progress step -5", "(progress: step: expected at least 0, got -5)"),
    ("progress best_score 'x'", "(progress: best_score: expected float, got str)"),
    ("progress batch_in_epoch 10**9", "(progress: batch_in_epoch=1000000000 is more than tokens"),
    ("progress best_score float('nan')", "(progress: best_score: expected a finite number"),
    ("progress step 2**70", "(progress: step: expected at most 4611686018427387904, got"),
    ("optimizer is a list", "incompatible checkpoint (optimizer: expected dict, got list)"),
    ("NaN weights", "holds NaN or infinite values"),
]


@pytest.mark.parametrize(("change", "needle"), CRAFTED, ids=[c for c, _ in CRAFTED])
def test_crafted_checkpoint_layouts_are_one_line_errors(
    run_dir: Path, good_payload: dict[str, Any], tmp_path: Path, change: str, needle: str
) -> None:
    crafted = tmp_path / "crafted.pt"
    torch.save(_mutate(good_payload, change), crafted)
    code, _, err = translate_with(run_dir, crafted)
    line = one_line_error(code, err)
    assert f"{crafted}: " in line and needle in line


def test_unreadable_checkpoint_is_not_called_corrupt(run_dir: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint the user may not read is reported as such, not as a damaged file (which
    would send them looking for corruption)."""
    last = run_dir / "checkpoints" / "last.pt"
    real_open = os.open

    def refuse(path: Any, *args: Any, **kwargs: Any) -> Any:
        if Path(path) == last:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(files.os, "open", refuse)
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(last)
    assert str(e.value) == f"{last}: cannot read (Permission denied)"


def test_the_unchanged_payload_loads(run_dir: Path, good_payload: dict[str, Any],
                                     tmp_path: Path) -> None:
    """The control for the test above: re-saving the payload as it is gives a working file."""
    copy_path = tmp_path / "copy.pt"
    torch.save(_mutate(good_payload, "nothing"), copy_path)
    code, out, err = translate_with(run_dir, copy_path)
    assert code == 0, err
    assert out.count("\n") == 1


# --- writes that fail or are interrupted --------------------------------------------------------


class _FullDisk(io.FileIO):
    """A file whose writes fail with ENOSPC once ``limit`` bytes are written."""

    limit = 2000

    def write(self, data: Any) -> int:
        if self.tell() + len(memoryview(data)) > self.limit:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return super().write(data)


class _Interrupted(io.FileIO):
    """A file whose write is interrupted by Ctrl-C once ``limit`` bytes are written."""

    limit = 2000

    def write(self, data: Any) -> int:
        if self.tell() + len(memoryview(data)) > self.limit:
            raise KeyboardInterrupt
        return super().write(data)


def _files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.mark.parametrize("failure", [_FullDisk, _Interrupted])
def test_failed_checkpoint_write_keeps_the_previous_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: type[io.FileIO]
) -> None:
    run = make_run(tmp_path / "run", trained=False)
    last = run / "checkpoints" / "last.pt"
    before = last.read_bytes()
    payload = load_checkpoint(last)
    payload["progress"] = {"step": 201}
    monkeypatch.setattr(os, "fdopen", lambda fd, mode="rb", *a, **k: failure(fd, "wb"))
    if failure is _FullDisk:
        with pytest.raises(NmtError) as e:
            save_checkpoint(last, payload)
        assert str(e.value) == (f"{last}: cannot write (No space left on device); the "
                                "previous file, if any, is unchanged")
    else:
        with pytest.raises(KeyboardInterrupt):
            save_checkpoint(last, payload)
    monkeypatch.undo()
    assert last.read_bytes() == before
    assert load_checkpoint(last)["progress"]["step"] == 200
    assert _files(last.parent) == ["last.pt"]  # no temporary file is left behind


def test_unwritable_run_directory_is_a_one_line_error_for_bleu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`nmt bleu` saves hypotheses and scores in the run directory, which may be read-only."""
    run = make_run(tmp_path / "run", trained=False)
    src, ref = tmp_path / "t.en", tmp_path / "r.fr"
    src.write_text("a b\n", encoding="utf-8")
    ref.write_text("b a\n", encoding="utf-8")

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    monkeypatch.setattr(files.tempfile, "mkstemp", refuse)  # as in a read-only directory
    code, _, err = invoke("bleu", "--run", str(run), "--src", str(src), "--ref", str(ref))
    line = one_line_error(code, err)
    assert f"{run}/hyp.file-t.en.txt: cannot write (Permission denied)" in line


def test_generic_atomic_write_reports_os_errors_and_cleans_up(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("old")

    def half_then_full(f: Any) -> None:
        f.write(b"new ")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(NmtError, match="notes.txt: cannot write .No space left on device."):
        atomic_write_bytes(target, half_then_full)
    assert target.read_text() == "old" and _files(tmp_path) == ["notes.txt"]

    def bug(f: Any) -> None:
        raise ValueError("a programming error")

    with pytest.raises(ValueError):  # not an OS failure: not dressed up as a user error
        atomic_write_bytes(target, bug)
    assert _files(tmp_path) == ["notes.txt"]


def test_stale_temporary_files_of_a_killed_writer_are_removed(tmp_path: Path) -> None:
    last = tmp_path / "checkpoints" / "last.pt"
    last.parent.mkdir()
    stale = last.parent / ".last.pt.k1ll3d.tmp"  # what a SIGKILL during a write leaves
    stale.write_bytes(b"PK\x03\x04 half a checkpoint")  # its writer's lock gone with it
    other = last.parent / ".best.pt.x.tmp"  # another file's: not ours to remove
    other.write_bytes(b"")
    save_checkpoint(last, {"config": {}, "vocab": {"src": 1, "tgt": 1, "joint": True},
                           "model": {"w": torch.ones(2)}})
    assert _files(last.parent) == [".best.pt.x.tmp", "last.pt"]


# --- SIGKILL during writes ----------------------------------------------------------------------

WRITER = """
import sys
from pathlib import Path
import torch
from nmt.runs.checkpoint import save_checkpoint
path, w = Path(sys.argv[1]), torch.zeros(2_000_000)  # 8 MB: most of the loop is the write
step = 0
while True:
    step += 1
    w.fill_(step)
    save_checkpoint(path, {"config": {}, "vocab": {"src": 1, "tgt": 1, "joint": True},
                           "model": {"w": w}, "progress": {"step": step}})
    print(step, flush=True)
"""


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", NMT_NO_PROGRESS="1")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_sigkill_during_checkpoint_writes_leaves_a_whole_checkpoint(tmp_path: Path) -> None:
    """A writer saving an 8 MB checkpoint in a loop is killed at random moments (processes one
    after another, at least three, and until a kill has landed inside a write: how often one
    does depends on the machine's speed, so the count of processes is not fixed); every time
    the file holds one whole save, the newest or the one before, and nothing else in the
    directory looks like a checkpoint."""
    last = tmp_path / "checkpoints" / "last.pt"
    rng = random.Random(1234)
    killed_mid_write = 0
    for attempt in range(20):
        if attempt >= 3 and killed_mid_write:
            break
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(last)], env=_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            first = proc.stdout.readline()  # one whole save done by this process
            assert first.strip().isdigit(), proc.stderr.read() if proc.stderr else ""
            # a new writer removes what the killed one left
            assert [p.name for p in last.parent.iterdir() if p.name.endswith(".tmp")
                    and p.stat().st_mtime < time.time() - 30] == []
            time.sleep(rng.uniform(0.05, 0.6))
        finally:
            proc.send_signal(signal.SIGKILL)
            out, _ = proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        steps = [int(x) for x in (first + out).split()]
        payload = load_checkpoint(last)
        step = payload["progress"]["step"]
        assert step in (steps[-1], steps[-1] + 1)  # + 1: renamed, killed before printing
        assert bool((payload["model"]["w"] == step).all())  # one save, not a mix of two
        leftovers = [p.name for p in last.parent.iterdir() if p.name != "last.pt"]
        assert all(n.startswith(".last.pt.") and n.endswith(".tmp") for n in leftovers)
        killed_mid_write += bool(leftovers)
        for name in leftovers:  # age them, as a later process would find them
            os.utime(last.parent / name, (time.time() - 60, time.time() - 60))
    assert killed_mid_write >= 1  # the kills did land inside writes


def test_progress_schema_is_the_training_loops_progress() -> None:
    """PROGRESS_FIELDS (what a checkpoint's progress may hold: nmt.training.loop imports
    nmt.runs.checkpoint, so the schema cannot be built from Progress) names every field of the
    loop's Progress with its type, and a fresh Progress passes it: a field added to one and not the
    other fails here, not on the first --resume."""
    import dataclasses

    from nmt.training.loop import Progress

    kinds = {f.name: f.type for f in dataclasses.fields(Progress)}
    assert {k: v.kind.__name__ for k, v in ckpt.PROGRESS_FIELDS.items()} == kinds
    assert ckpt.check_progress(Progress().as_dict()) == ""
