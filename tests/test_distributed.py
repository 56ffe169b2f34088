"""Two training processes under torchrun (gloo on CPU): training, the collectives' agreement at
the end of a run, and exact resume."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import run_metrics

from nmt.runs.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parent.parent
SETS = [
    "data.tokenizer=word", "data.min_freq=1", "data.valid_frac=0.1", "data.test_frac=0.1",
    "model.arch=transformer", "model.d_model=16", "model.d_ff=32", "model.n_heads=2",
    "model.n_layers=1", "train.batch_size=16", "train.eval_sentences=10", "train.log_every=3",
    "train.device=cpu", "train.threads=1",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def torchrun(data_dir: Path, runs: Path, name: str, *sets: str,
             resume: bool = False) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
        "--master_port", str(free_port()), "-m", "nmt", "train",
        "--config", str(ROOT / "configs/demo.toml"),
        "--runs-dir", str(runs), "--data-dir", str(data_dir), "--run-name", name,
        *(["--resume"] if resume else []), *[x for s in [*SETS, *sets] for x in ("--set", s)],
    ]
    env = {**os.environ, "NMT_NO_PROGRESS": "1", "OMP_NUM_THREADS": "1"}
    # A rank left waiting in a collective would hang: the timeout turns that into a failure,
    # and takes the workers down with the launcher (they share its process group).
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"torchrun {name}: no exit within 240 s\n{err[-2000:]}{out[-1000:]}")
    assert proc.returncode == 0, err[-3000:] + out[-2000:]
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@pytest.mark.slow
def test_two_process_gloo_training(tiny_data_dir: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    proc = torchrun(tiny_data_dir, runs, "ddp", "train.max_steps=12", "train.eval_every=6")
    assert proc.stdout.count("tokens/sec on cpu") == 1  # rank 0 reports, rank 1 does not
    run = runs / "ddp"
    payload = load_checkpoint(run / "checkpoints" / "last.pt")
    assert payload["progress"]["step"] == 12
    assert len(payload["rng"]) == 2  # one generator state per rank, for exact resume
    # Only rank 0 writes: one metrics line per event, not two.
    steps = [r["step"] for r in run_metrics(run) if "train_loss" in r]
    assert steps == [3, 6, 9, 12]
    assert all(torch.isfinite(v).all() for v in payload["model"].values()
               if v.is_floating_point())

    # Stopped at step 6 and resumed: the same metrics as the run straight to step 12.
    torchrun(tiny_data_dir, runs, "split", "train.max_steps=6", "train.eval_every=6")
    torchrun(tiny_data_dir, runs, "split", "train.max_steps=12", resume=True)
    assert run_metrics(runs / "split") == run_metrics(run)


@pytest.mark.slow
def test_two_process_run_whose_first_validation_is_the_last(tiny_data_dir: Path,
                                                           tmp_path: Path) -> None:
    """best.pt is first written by the final validation (no validation within the epoch): every
    rank must take the same branch there, or one waits forever for the other."""
    runs = tmp_path / "runs"
    torchrun(tiny_data_dir, runs, "late", "train.max_steps=5", "train.eval_every=0")
    run = runs / "late"
    assert (run / "checkpoints" / "best.pt").is_file()
    assert [r["step"] for r in run_metrics(run) if "valid_loss" in r] == [5]
