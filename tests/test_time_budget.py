"""A run the time budget cut short says so beside its scores: at the end of ``nmt train``, in
``nmt bleu``'s output and its saved scores, in ``nmt runs`` and in ``train.log``."""

from __future__ import annotations

import json
from itertools import count
from pathlib import Path

import pytest
from conftest import invoke

from nmt.runs.checkpoint import load_checkpoint
from nmt.runs.time_budget import cut_short, run_cut_short, time_budget_reason
from nmt.training.state import Run

TINY = [
    "data.tokenizer=word", "data.min_freq=1", "data.valid_frac=0.1", "data.test_frac=0.1",
    "model.d_model=16", "model.n_layers=1", "model.d_ff=32", "model.n_heads=2",
    "train.batch_size=32", "train.eval_every=100", "train.eval_sentences=5",
    "train.log_every=1", "train.device=cpu", "decode.beam=1",
]


def test_the_rule_names_steps_done_of_steps_asked() -> None:
    cut = {"finished": True, "stop_reason": time_budget_reason(20), "step": 812, "epoch": 1}
    assert cut_short(cut, {"max_steps": 2000, "max_minutes": 20}) == (
        "stopped at step 812 of 2,000 (train.max_minutes = 20): a partly trained model")
    assert cut_short(cut, {"max_steps": 0, "epochs": 60, "max_minutes": 10.5}) == (
        "stopped at step 812, in epoch 2 of 60 (train.max_minutes = 10.5)")
    # every step done, another reason, or not finished: nothing to say
    assert cut_short({**cut, "step": 2000}, {"max_steps": 2000, "max_minutes": 20}) is None
    assert cut_short({**cut, "stop_reason": "reached max_steps=2000"},
                     {"max_steps": 2000}) is None
    assert cut_short({**cut, "finished": False}, {"max_steps": 2000, "max_minutes": 20}) is None
    assert cut_short({**cut, "epoch": 60}, {"max_steps": 0, "epochs": 60}) is None


def test_a_run_cut_by_its_time_budget_says_so_beside_its_scores(
        tiny_data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a clock that runs 20 training seconds each time it is read: a minute's budget ends the
    # run after a few of its 50 steps, without sleeping
    ticks = count()
    monkeypatch.setattr(Run, "clock", lambda self: 20.0 * next(ticks))
    sets = [x for s in [*TINY, "train.max_steps=50", "train.max_minutes=1"]
            for x in ("--set", s)]
    code, out, err = invoke("train", "--config", "configs/demo.toml", "--runs-dir",
                            str(tmp_path), "--data-dir", str(tiny_data_dir), "--run-name", "cut",
                            *sets)
    assert code == 0, out + err
    run = tmp_path / "cut"
    step = load_checkpoint(run / "checkpoints" / "last.pt")["progress"]["step"]
    assert 0 < step < 50
    said = f"{run} stopped at step {step} of 50 (train.max_minutes = 1): a partly trained model"
    assert out.strip().splitlines()[-1] == f"note: {said}"  # the command's last line
    assert run_cut_short(run) == said
    assert f"note: stopped at step {step} of 50" in (run / "train.log").read_text()

    code, out, err = invoke("bleu", "--run", str(run), "--data-dir", str(tiny_data_dir))
    assert code == 0, err
    lines = out.splitlines()
    last_score = max(i for i, line in enumerate(lines) if line.startswith(("BLEU", "chrF")))
    assert lines[last_score + 1] == f"note: {said}"  # beside the scores
    saved = json.loads(next(run.glob("scores.test*.json")).read_text())
    assert saved["cut_short"] == said

    code, out, err = invoke("runs", "--runs-dir", str(tmp_path))
    assert code == 0, err
    flat = " ".join(out.split())
    assert "cut short" in flat and f"cut stopped at step {step} of 50" in flat


def test_a_run_that_did_every_step_says_nothing(tiny_data_dir: Path, tmp_path: Path) -> None:
    sets = [x for s in [*TINY, "train.max_steps=2", "train.max_minutes=60"]
            for x in ("--set", s)]
    code, out, err = invoke("train", "--config", "configs/demo.toml", "--runs-dir",
                            str(tmp_path), "--data-dir", str(tiny_data_dir), "--run-name", "ok",
                            *sets)
    assert code == 0, out + err
    assert "note:" not in out and run_cut_short(tmp_path / "ok") is None
    code, out, _ = invoke("runs", "--runs-dir", str(tmp_path))
    assert "cut short" not in out and "done" in out
