"""Two training processes under torchrun (gloo on CPU): DDP keeps replicas identical."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from nmt.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_two_process_gloo_training(tiny_data_dir: Path, tmp_path: Path) -> None:
    sets = [
        "data.tokenizer=word", "data.min_freq=1", "data.valid_frac=0.1", "data.test_frac=0.1",
        "model.arch=transformer", "model.d_model=16", "model.d_ff=32", "model.n_heads=2",
        "model.n_layers=1", "train.batch_size=16", "train.max_steps=12", "train.eval_every=6",
        "train.eval_sentences=10", "train.log_every=3", "train.device=cpu", "train.threads=1",
    ]
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
        "--master_port", "29533", "-m", "nmt", "train", "--config", str(ROOT / "configs/demo.toml"),
        "--runs-dir", str(tmp_path / "runs"), "--data-dir", str(tiny_data_dir), "--run-name", "ddp",
        *[x for s in sets for x in ("--set", s)],
    ]
    env = {**os.environ, "NMT_NO_PROGRESS": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    assert "tokens/sec on cpu" in proc.stdout
    run = tmp_path / "runs" / "ddp"
    payload = load_checkpoint(run / "checkpoints" / "last.pt")
    assert payload["progress"]["step"] == 12
    assert len(payload["rng"]) == 2  # one generator state per rank, for exact resume
    # Only rank 0 writes: one metrics line per event, not two.
    steps = [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()
             if "train_loss" in json.loads(x)]
    assert steps == [3, 6, 9, 12]
    assert all(torch.isfinite(v).all() for v in payload["model"].values()
               if v.is_floating_point())
