"""A live `nmt train` process: readers while it writes, SIGTERM, and (slow) SIGKILL with resume.

Training runs in a subprocess on a tiny corpus and saves ``last.pt`` after every step
(``eval_every=1``), so the file is replaced many times a second while other processes read it.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import random
import re
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from test_train import TINY, tiny_config
from typer.testing import CliRunner

from nmt.cli import app
from nmt.errors import CheckpointError, NmtError
from nmt.runs.checkpoint import load_checkpoint
from nmt.training.loop import train

ROOT = Path(__file__).resolve().parent.parent
LIVE = [  # TINY, but running until stopped: validation (loss only) and last.pt every step
    *TINY, "train.epochs=1000", "train.eval_every=1", "train.eval_sentences=-1",
    "train.log_every=1000", "train.threads=1", "train.max_minutes=3",
]


def _env(data_dir: Path, digest: str) -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", NMT_NO_PROGRESS="1", NMT_DATA_DIR=str(data_dir),
               NMT_CORPUS_SHA256=digest, NMT_DATA_MIRROR=str(data_dir),
               COLUMNS="500")  # messages are not wrapped
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _data_dir(directory: Path, corpus_zip: Path) -> tuple[Path, str]:
    data = directory / "data"
    with zipfile.ZipFile(corpus_zip) as z:
        z.extractall(data)
        digest = hashlib.sha256(z.read("fra-eng/fra.txt")).hexdigest()
    return data, digest


def _start_training(runs: Path, data: Path, digest: str, *extra: str,
                    resume: bool = False) -> subprocess.Popen[str]:
    sets = [x for s in [*LIVE, *extra] for x in ("--set", s)]
    how = ["--resume"] if resume else ["--config", str(ROOT / "configs" / "demo.toml")]
    return subprocess.Popen(
        [sys.executable, "-m", "nmt", "train", *how, *sets, "--runs-dir", str(runs),
         "--run-name", "live", "--data-dir", str(data)],
        cwd=ROOT, env=_env(data, digest), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)


def _mtime(path: Path) -> int:
    return path.stat().st_mtime_ns if path.is_file() else 0


def _wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 120,
              newer_than: int = 0) -> None:
    """Until ``path`` exists (and was written after ``newer_than``, an mtime in ns)."""
    end = time.monotonic() + timeout
    while _mtime(path) <= newer_than:
        if proc.poll() is not None:
            pytest.fail(f"training exited with {proc.returncode}: {proc.communicate()[1]}")
        if time.monotonic() > end:
            pytest.fail(f"{path} did not appear within {timeout} s")
        time.sleep(0.1)


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.communicate(timeout=30)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory,
         tiny_corpus_zip: Path) -> Iterator[tuple[subprocess.Popen[str], Path, dict[str, str]]]:
    """A training process that has written its first last.pt and keeps replacing it."""
    root = tmp_path_factory.mktemp("live")
    data, digest = _data_dir(root, tiny_corpus_zip)
    proc = _start_training(root / "runs", data, digest)
    run = root / "runs" / "live"
    try:
        _wait_for(run / "checkpoints" / "last.pt", proc)
        yield proc, run, _env(data, digest)
    finally:
        _stop(proc)


def _reader(run: Path, seconds: float, how: str, results: Any) -> None:
    """Read last.pt for ``seconds`` (``load``: load_checkpoint in a tight loop; ``cli``:
    `nmt translate --checkpoint last` in-process); put the reads, steps and errors seen."""
    runner, steps, errors, reads = CliRunner(), set(), [], 0
    end = None
    while end is None or time.monotonic() < end:
        reads += 1
        if how == "load":
            try:
                steps.add(load_checkpoint(run / "checkpoints" / "last.pt")["progress"]["step"])
            except NmtError as e:
                errors.append(str(e))
        else:
            r = runner.invoke(app, ["translate", "--run", str(run), "--checkpoint", "last",
                                    "--device", "cpu", "I see the dog."])
            if r.exit_code != 0 or r.stdout.count("\n") != 1:
                errors.append(f"exit {r.exit_code}: {r.stderr.strip()} {r.exception!r}")
        end = end or time.monotonic() + seconds  # from the first read: lazy imports are done
    results.put({"how": how, "reads": reads, "steps": sorted(steps), "errors": errors})


def test_readers_see_whole_checkpoints_while_training_writes(
    live: tuple[subprocess.Popen[str], Path, dict[str, str]],
) -> None:
    """Two processes read last.pt while training replaces it after every step: one loads it
    in a tight loop, the other runs `nmt translate --checkpoint last` in a loop. Every read
    succeeds, and the loader sees several different steps (the file did change under it)."""
    proc, run, _ = live
    ctx = multiprocessing.get_context("fork")  # forked: no second import of torch and nmt
    results = ctx.Queue()
    readers = [ctx.Process(target=_reader, args=(run, 4.0, how, results))
               for how in ("load", "cli")]
    for reader in readers:
        reader.start()
    got = {r["how"]: r for r in (results.get(timeout=120) for _ in readers)}
    for reader in readers:
        reader.join(timeout=30)
        assert reader.exitcode == 0
    assert proc.poll() is None  # training was writing all along
    loads, translations = got["load"], got["cli"]
    assert loads["errors"] == [] and translations["errors"] == []
    assert loads["reads"] >= 10 and translations["reads"] >= 2, (loads, translations)
    assert len(loads["steps"]) >= 2, loads


def test_overwrite_while_training_runs_is_refused(
    live: tuple[subprocess.Popen[str], Path, dict[str, str]],
) -> None:
    """`nmt train --overwrite` (or --resume) of a run another `nmt train` is writing is refused,
    naming that process; the run goes on untouched (before: the directory was replaced under
    the running training, leaving a mix of both)."""
    proc, run, env = live
    config = (run / "config.toml").read_bytes()
    sets = [x for s in LIVE for x in ("--set", s)]
    for how in (["--overwrite", "--config", str(ROOT / "configs" / "demo.toml"), *sets],
                ["--resume"]):
        second = subprocess.run(
            [sys.executable, "-m", "nmt", "train", *how, "--runs-dir", str(run.parent),
             "--run-name", run.name, "--data-dir", env["NMT_DATA_DIR"]],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert second.returncode == 1, second.stderr
        assert second.stderr == (f"error: {run}: another nmt train (PID {proc.pid}) is writing "
                                 "this run; wait for it to finish or stop it, or use --run-name "
                                 "to start another\n")
    assert proc.poll() is None and (run / "config.toml").read_bytes() == config
    load_checkpoint(run / "checkpoints" / "last.pt")


def test_sigterm_saves_last_checkpoint_and_exits_143(
    live: tuple[subprocess.Popen[str], Path, dict[str, str]],
) -> None:
    proc, run, _ = live
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err  # stopped by a signal, state saved
    assert "Traceback" not in err
    said = re.search(r"interrupted: saved (\S+) at step (\d+); continue with --resume", err)
    assert said is not None, err
    assert Path(said.group(1)) == run / "checkpoints" / "last.pt"
    payload = load_checkpoint(run / "checkpoints" / "last.pt")
    assert payload["progress"]["step"] == int(said.group(2))
    assert payload["progress"]["stop_reason"] == "interrupted"
    assert f"{run}: interrupted; step {said.group(2)}" in err
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["best.pt", "last.pt"]


def _pair(run: Path) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The progress tables of last.pt and best.pt (None: no best.pt yet); both must load."""
    last = load_checkpoint(run / "checkpoints" / "last.pt")["progress"]
    best_path = run / "checkpoints" / "best.pt"
    return last, load_checkpoint(best_path)["progress"] if best_path.is_file() else None


def _agree(last: dict[str, Any], best: dict[str, Any] | None) -> bool:
    """best.pt holds the save last.pt names as its best: same step, same score."""
    if best is None:
        return last["best_step"] == 0  # nothing improved yet, so nothing to hold
    return best["step"] == last["best_step"] and best["best_score"] == last["best_score"]


@pytest.mark.slow
def test_sigkill_at_random_moments_then_resume(tmp_path: Path, tiny_corpus_zip: Path) -> None:
    """`nmt train` (validating and saving every step, so best.pt and last.pt are written all
    the time) is SIGKILLed ten times at random moments, resuming after each. After every kill
    both files load and either agree, or best.pt is exactly one improving save ahead of last.pt
    (killed between the two renames), which the resume adopts: after it they agree. The step
    grows every time and a last resume finishes."""
    from nmt.runs.directory import adopt_newer_best

    data, digest = _data_dir(tmp_path, tiny_corpus_zip)
    runs = tmp_path / "runs"
    run = runs / "live"
    last = run / "checkpoints" / "last.pt"
    rng = random.Random(7)
    step, ahead = 0, 0
    for i in range(10):
        before = _mtime(last)
        proc = _start_training(runs, data, digest, resume=i > 0)
        try:
            _wait_for(last, proc, newer_than=before)
            time.sleep(rng.uniform(0.0, 1.5))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=30)
        last_p, best_p = _pair(run)
        if not _agree(last_p, best_p):
            assert best_p is not None and best_p["step"] > last_p["step"], (last_p, best_p)
            assert best_p["best_step"] == best_p["step"]  # an improving save, whole
            ahead += 1
            adopt_newer_best(run)  # what --resume does first
            last_p, best_p = _pair(run)
        assert _agree(last_p, best_p), (last_p, best_p)
        assert last_p["step"] > step
        step = last_p["step"]
        names = [p.name for p in last.parent.iterdir()]
        assert all(n in ("last.pt", "best.pt") or (n.startswith(".") and n.endswith(".tmp"))
                   for n in names), names
    final = step + 3
    proc = _start_training(runs, data, digest, f"train.max_steps={final}", resume=True)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert _agree(*_pair(run))
    assert load_checkpoint(last)["progress"]["step"] == final
    print(f"{ahead} of 10 kills landed between the best.pt and last.pt writes")


PROGRESS_DAMAGE = {  # progress field -> a wrong value, and what the error says about it
    "warp_factor": (9, "progress: warp_factor: unknown field"),
    "epoch": ("x", "progress: epoch: expected int, got str"),
    "elapsed": (None, "progress: elapsed: expected float, got NoneType"),
    "batch_in_epoch": (10**9, "progress: batch_in_epoch=1000000000 is more than tokens="),
    "step": (-5, "progress: step: expected at least 0, got -5"),
    "best_score": ("x", "progress: best_score: expected float, got str"),
    "finished": (1, "progress: finished: expected bool, got int"),
    "best_step": (10**6, "progress: best_step=1000000 is more than step=2"),
}


@pytest.mark.parametrize("damage", [*PROGRESS_DAMAGE, "rng missing", "rng garbage"])
def test_resume_from_a_damaged_checkpoint_is_a_one_line_error(
    tiny_data_dir: Path, tmp_path: Path, damage: str
) -> None:
    """A last.pt that loads but whose progress or RNG entries are wrong (edited, or from
    another program) cannot be resumed from: a one-line CheckpointError, the file untouched.
    Progress fields of the wrong type or out of range are refused when the file is loaded."""
    run = tmp_path / "run"
    cfg = tiny_config("gru", "train.max_steps=2")
    train(cfg, run, data_dir=tiny_data_dir, log=lambda s: None)
    last = run / "checkpoints" / "last.pt"
    payload = load_checkpoint(last)
    needle = "cannot resume ("
    if damage in PROGRESS_DAMAGE:
        payload["progress"][damage], what = PROGRESS_DAMAGE[damage]
        needle = f"incompatible checkpoint ({what}"
    elif damage == "rng missing":
        del payload["rng"]
    else:
        payload["rng"] = {"python": "not a state", "numpy": [], "torch": torch.zeros(1)}
    torch.save(payload, last)
    before = last.read_bytes()
    with pytest.raises(CheckpointError) as e:
        train(tiny_config("gru", "train.max_steps=4"), run, data_dir=tiny_data_dir,
              resume=True, log=lambda s: None)
    assert str(e.value).startswith(f"{last}: {needle}") and "\n" not in str(e.value), e.value
    assert last.read_bytes() == before


def test_metrics_line_cut_by_a_crash(tmp_path: Path) -> None:
    """metrics.jsonl is appended to; a kill mid-append leaves half a line (and, on a damaged
    disk, any junk). Plots skip such lines and --resume drops them with the records after the
    checkpoint, so the resumed log is whole again."""
    from nmt.runs.directory import MetricsLog, read_metrics

    good = [json.dumps({"step": s, "train_loss": 1.0 / s}) for s in (1, 2, 3)]
    junk = ["5", "[1]", "null", '{"step": "x"}', "\x00\x00"]
    (tmp_path / "metrics.jsonl").write_text("\n".join([*good, *junk]) + '\n{"step": 4, "tr',
                                            encoding="utf-8")
    assert [r["step"] for r in read_metrics(tmp_path)] == [1, 2, 3]
    MetricsLog(tmp_path, True).truncate_after(2)
    assert (tmp_path / "metrics.jsonl").read_text(encoding="utf-8") == "\n".join(good[:2]) + "\n"
