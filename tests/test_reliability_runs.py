"""Run directories under faults: an edited config on --resume, a kill between the best.pt and
last.pt writes, a second writer, links planted in the run, a full disk or no permission while
training."""

from __future__ import annotations

import errno
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import invoke
from test_train import TINY, tiny_config

import nmt.files as files
import nmt.training.state as train_state
from nmt.errors import NmtError
from nmt.runs.checkpoint import load_checkpoint
from nmt.training.loop import train

ROOT = Path(__file__).resolve().parent.parent


def _cli_args(runs: Path, data: Path, name: str = "r") -> list[str]:
    return ["train", "--runs-dir", str(runs), "--data-dir", str(data), "--run-name", name]


def _sets(*extra: str) -> list[str]:
    return [x for s in [*TINY, *extra] for x in ("--set", s)]


def pair_agrees(run: Path) -> None:
    """``best.pt`` holds the save ``last.pt`` names as its best (same step, same score)."""
    last = load_checkpoint(run / "checkpoints" / "last.pt")["progress"]
    best = load_checkpoint(run / "checkpoints" / "best.pt")["progress"]
    assert best["step"] == last["best_step"], (best, last)
    assert best["best_score"] == last["best_score"] or (
        math.isinf(last["best_score"]) and best["step"] == last["step"])


@pytest.mark.parametrize(("section", "line", "edited"), [
    ("data", "max_pairs = 0", "max_pairs = 300"),
    ("model", "dropout = 0.1", "dropout = 0.3"),
])
def test_resume_compares_with_the_checkpoint_not_the_edited_config(
    tiny_data_dir: Path, tmp_path: Path, section: str, line: str, edited: str
) -> None:
    """Editing runs/NAME/config.toml's [data] or [model] and resuming is refused, naming the key
    and both values; nothing is trained, no data cache for the edited config is built."""
    runs = tmp_path / "runs"
    code, out, err = invoke(*_cli_args(runs, tiny_data_dir), "--config", "configs/demo.toml",
                            *_sets("train.max_steps=2"))
    assert code == 0, err
    run = runs / "r"
    text = (run / "config.toml").read_text()
    assert line in text
    (run / "config.toml").write_text(text.replace(line, edited))
    last = (run / "checkpoints" / "last.pt").read_bytes()
    caches = sorted((tiny_data_dir / "cache").iterdir())
    code, out, err = invoke(*_cli_args(runs, tiny_data_dir), "--resume",
                            "--set", "train.max_steps=4")
    key, new = edited.split(" = ")
    assert code == 2, out + err
    assert err.count("\n") == 1 and err.startswith(f"error: {run}/config.toml: [{section}] "
                                                   "cannot change on --resume"), err
    assert f"{section}.{key} is {new}" in err and "trained with" in err
    assert (run / "checkpoints" / "last.pt").read_bytes() == last
    assert sorted((tiny_data_dir / "cache").iterdir()) == caches


def test_library_resume_checks_the_checkpoint_config_too(tiny_data_dir: Path,
                                                         tmp_path: Path) -> None:
    run = tmp_path / "r"
    train(tiny_config("gru", "train.max_steps=2"), run, data_dir=tiny_data_dir,
          log=lambda s: None)
    with pytest.raises(NmtError, match=r"\[model\] cannot change on --resume \(model.hidden is "
                                       r"32, but the checkpoint was trained with 16\)"):
        train(tiny_config("gru", "train.max_steps=4", "model.hidden=32"), run,
              data_dir=tiny_data_dir, resume=True, log=lambda s: None)


class _Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs, no handler, no clean-up."""


def test_a_kill_between_the_best_and_last_writes_loses_no_best(
    tiny_data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Training dies right after the first of the two files an improving validation writes.
    --resume then starts from a pair that agrees: best.pt holds the step last.pt names as best,
    with its score (before: last.pt named a best that best.pt did not hold)."""
    run = tmp_path / "r"
    cfg = tiny_config("gru", "train.epochs=3", "train.eval_every=5", "train.eval_sentences=-1")
    real_save = train_state.save_checkpoint
    improved: list[int] = []

    def save_then_die(path: Path, payload: dict[str, Any]) -> None:
        real_save(path, payload)
        p = payload["progress"]
        if p["best_step"] == p["step"] and p["step"] > 0:
            improved.append(p["step"])
            if len(improved) == 3:  # the first write of the third improving validation
                raise _Killed

    monkeypatch.setattr(train_state, "save_checkpoint", save_then_die)
    with pytest.raises(_Killed):
        train(cfg, run, data_dir=tiny_data_dir, log=lambda s: None)
    monkeypatch.setattr(train_state, "save_checkpoint", real_save)
    died_at = improved[-1]
    best = load_checkpoint(run / "checkpoints" / "best.pt")["progress"]
    assert best["step"] == died_at  # the save that improved is kept

    result = train(cfg, run, data_dir=tiny_data_dir, resume=True, log=lambda s: None)
    assert result.progress.finished
    pair_agrees(run)
    metrics = (run / "metrics.jsonl").read_text()
    assert metrics.count(f'"step": {died_at}, "epoch"') == 1  # that validation is not redone


def _hold_lock(run: Path) -> subprocess.Popen[str]:
    """Another process holding ``run``'s lock (as a training would), until killed."""
    code = ("import sys, time; from pathlib import Path; from nmt.runs.directory import run_lock\n"
            "with run_lock(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(300)")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-c", code, str(run)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None and proc.stdout.readline() == "held\n", proc.communicate()
    return proc


def test_a_second_writer_is_refused_and_the_lock_dies_with_its_holder(
    tiny_data_dir: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    code, _, err = invoke(*_cli_args(runs, tiny_data_dir), "--config", "configs/demo.toml",
                          *_sets("train.max_steps=2"))
    assert code == 0, err
    run = runs / "r"
    before = {p.name: p.read_bytes() for p in (run / "checkpoints").iterdir()}
    holder = _hold_lock(run)
    try:
        for how in (["--overwrite", "--config", "configs/demo.toml", *_sets()],
                    ["--resume", "--set", "train.max_steps=4"]):
            code, _, err = invoke(*_cli_args(runs, tiny_data_dir), *how)
            assert code == 1 and err.count("\n") == 1, err
            assert f"another nmt train (PID {holder.pid}) is writing this run" in err
        assert {p.name: p.read_bytes() for p in (run / "checkpoints").iterdir()} == before
    finally:
        holder.kill()
        holder.communicate()
    code, _, err = invoke(*_cli_args(runs, tiny_data_dir), "--resume",
                          "--set", "train.max_steps=4")
    assert code == 0, err  # SIGKILL released the lock: no stale lock file blocks the run
    assert load_checkpoint(run / "checkpoints" / "last.pt")["progress"]["step"] == 4


@pytest.mark.parametrize("name", ["train.log", "metrics.jsonl"])
def test_links_planted_in_a_run_are_not_appended_through(
    tiny_data_dir: Path, tmp_path: Path, name: str
) -> None:
    run = tmp_path / "r"
    train(tiny_config("gru", "train.max_steps=2"), run, data_dir=tiny_data_dir,
          log=lambda s: None)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (run / name).unlink()
    (run / name).symlink_to(victim)
    with pytest.raises(NmtError) as e:
        train(tiny_config("gru", "train.max_steps=4"), run, data_dir=tiny_data_dir,
              resume=True, log=lambda s: None)
    assert str(e.value).startswith(f"{run / name}: is a symbolic link; refusing to write")
    assert victim.read_text() == "precious\n"


def test_a_link_planted_as_the_attention_picture_is_replaced_not_written_through(
    tmp_path: Path
) -> None:
    from test_decode import make_run

    run = make_run(tmp_path / "run", trained=False)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (run / "attention.png").symlink_to(victim)
    code, _, err = invoke("attention", "i see the dog .", "--run", str(run), "--device", "cpu")
    assert code == 0, err
    assert victim.read_text() == "precious\n"
    assert not (run / "attention.png").is_symlink()
    assert (run / "attention.png").read_bytes()[:4] == b"\x89PNG"


def _enospc_after(monkeypatch: pytest.MonkeyPatch, suffix: str, calls: int) -> None:
    """Appends to files ending in ``suffix`` fail with ENOSPC after ``calls`` of them (the file,
    opened and checked, is written on /dev/full, so the failure is the kernel's)."""
    real_open, real_fdopen = os.open, os.fdopen
    seen, full = [0], set()

    def fake_open(path: Any, flags: int, mode: int = 0o777, **kw: Any) -> int:
        fd = real_open(path, flags, mode, **kw)
        if str(path).endswith(suffix) and flags & os.O_APPEND:
            seen[0] += 1
            if seen[0] > calls:
                full.add(fd)
        return fd

    def fake_fdopen(fd: int, *args: Any, **kw: Any) -> Any:
        if fd in full:
            full.discard(fd)
            os.close(fd)
            return open("/dev/full", "ab")  # noqa: SIM115 - the caller's with block closes it
        return real_fdopen(fd, *args, **kw)

    monkeypatch.setattr(files.os, "open", fake_open)
    monkeypatch.setattr(files.os, "fdopen", fake_fdopen)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_full_disk_while_appending_metrics_is_one_line_and_keeps_last_pt(
    tiny_data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "r"
    train(tiny_config("gru", "train.max_steps=3"), run, data_dir=tiny_data_dir,
          log=lambda s: None)
    last = (run / "checkpoints" / "last.pt").read_bytes()
    _enospc_after(monkeypatch, "metrics.jsonl", 1)  # the first append (the touch) works
    with pytest.raises(NmtError) as e:
        train(tiny_config("gru", "train.max_steps=9", "train.log_every=1"), run,
              data_dir=tiny_data_dir, resume=True, log=lambda s: None)
    assert str(e.value) == f"{run}/metrics.jsonl: cannot write (No space left on device)"
    assert (run / "checkpoints" / "last.pt").read_bytes() == last


def test_unwritable_run_directory_on_resume_is_one_line(
    tiny_data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As in a read-only run directory (injected: the tests may run as root, whom chmod does not
    stop)."""
    run = tmp_path / "r"
    train(tiny_config("gru", "train.max_steps=2"), run, data_dir=tiny_data_dir,
          log=lambda s: None)
    real_open = os.open

    def read_only(path: Any, flags: int, mode: int = 0o777, **kw: Any) -> int:
        if str(path).startswith(str(run)) and flags & (os.O_WRONLY | os.O_RDWR):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, mode, **kw)

    monkeypatch.setattr(files.os, "open", read_only)
    with pytest.raises(NmtError) as e:
        train(tiny_config("gru", "train.max_steps=4"), run, data_dir=tiny_data_dir,
              resume=True, log=lambda s: None)
    assert str(e.value) == f"{run}/metrics.jsonl: cannot write (Permission denied)"


def test_runs_dir_that_cannot_be_created_is_one_line(tiny_data_dir: Path,
                                                     tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code, _, err = invoke(*_cli_args(blocker / "runs", tiny_data_dir), "--config",
                          "configs/demo.toml", *_sets())
    assert code == 1 and err.count("\n") == 1, err
    assert f"{blocker}/runs: cannot create the directory (Not a directory)" in err


def test_non_finite_loss_before_any_checkpoint_says_none_was_kept(tiny_data_dir: Path,
                                                                  tmp_path: Path) -> None:
    run = tmp_path / "r"
    with pytest.raises(NmtError) as e:
        train(tiny_config("gru", "train.lr=1e308", "train.clip_norm=0"), run,
              data_dir=tiny_data_dir, log=lambda s: None)
    assert "non-finite loss at step" in str(e.value)
    assert "no checkpoint had been saved yet" in str(e.value)
    assert not (run / "checkpoints" / "last.pt").exists()


def test_a_run_whose_checkpoints_folder_is_a_link_is_not_resumed(tiny_data_dir: Path,
                                                                 tmp_path: Path) -> None:
    """Checkpoints would be written into the link's target: refused, the target untouched."""
    run = tmp_path / "r"
    train(tiny_config("gru", "train.max_steps=2"), run, data_dir=tiny_data_dir,
          log=lambda s: None)
    elsewhere = tmp_path / "elsewhere"
    (run / "checkpoints").rename(elsewhere)
    (run / "checkpoints").symlink_to(elsewhere)
    before = {p.name: p.read_bytes() for p in elsewhere.iterdir()}
    with pytest.raises(NmtError) as e:
        train(tiny_config("gru", "train.max_steps=4"), run, data_dir=tiny_data_dir,
              resume=True, log=lambda s: None)
    assert str(e.value).startswith(f"{run}/checkpoints: is a symbolic link")
    assert {p.name: p.read_bytes() for p in elsewhere.iterdir()} == before


def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(tiny_data_dir: Path,
                                                                  tmp_path: Path) -> None:
    """lr=1e37: step 1 is finite and saved (validation every step), its update makes the next
    loss infinite. Training stops with one line, and last.pt is step 1's, all weights finite."""
    import torch

    run = tmp_path / "r"
    with pytest.raises(NmtError) as e:
        train(tiny_config("gru", "train.lr=1e37", "train.clip_norm=0", "train.eval_every=1",
                          "train.eval_sentences=-1"),
              run, data_dir=tiny_data_dir, log=lambda s: None)
    assert str(e.value).startswith("non-finite loss at step 2: training stopped; the last good "
                                   f"checkpoint is kept in {run}/checkpoints")
    payload = load_checkpoint(run / "checkpoints" / "last.pt")
    assert payload["progress"]["step"] == 1
    assert all(bool(torch.isfinite(w).all()) for w in payload["model"].values())


def test_a_run_preparing_its_data_is_listed_as_starting(tmp_path: Path) -> None:
    """``nmt train`` holds the run's lock from the start and writes config.toml only once its
    data is prepared: in between, ``nmt runs`` says so (with the PID), not "not a run"."""
    from nmt.runs.directory import lock_holder, run_lock
    from nmt.runs.table import run_info

    run = tmp_path / "runs" / "new"
    run.mkdir(parents=True)
    assert lock_holder(run) is None and run_info(run).state == "not a run"
    with run_lock(run):
        info = run_info(run)
        assert info.state == "starting"
        assert info.note == f"nmt train (PID {os.getpid()}) is preparing its data"
    assert lock_holder(run) is None and run_info(run).state == "not a run"
