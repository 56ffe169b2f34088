"""Training: loss, clipping, exact resume, interruption, run directories, CLI errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from nmt.checkpoint import load_checkpoint, load_run
from nmt.cli import app
from nmt.config import Config, load_config
from nmt.data.tokenizers import PAD_ID
from nmt.errors import NmtError
from nmt.train import StopFlag, lr_lambda, masked_cross_entropy, train

TINY = [
    "data.tokenizer=word", "data.min_freq=1", "data.valid_frac=0.1", "data.test_frac=0.1",
    "model.d_model=16", "model.hidden=16", "model.d_ff=32", "model.n_heads=2", "model.n_layers=1",
    "train.batch_size=32", "train.epochs=1", "train.eval_every=10", "train.eval_sentences=20",
    "train.log_every=3", "train.device=cpu", "train.lr=0.003",
]


def tiny_config(arch: str = "transformer", *extra: str) -> Config:
    return load_config(None, [*TINY, f"model.arch={arch}", *extra])


def read_metrics(run: Path) -> list[dict]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(x).items() if k != "tokens_per_sec"} for x in lines]


def test_masked_cross_entropy_ignores_padding() -> None:
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 7)
    tgt = torch.tensor([[3, 4, 5, PAD_ID], [6, PAD_ID, PAD_ID, PAD_ID]])
    full = masked_cross_entropy(logits, tgt)
    changed = logits.clone()
    changed[0, 3] += 100.0  # logits at padded positions do not matter
    changed[1, 1:] -= 50.0
    assert torch.allclose(masked_cross_entropy(changed, tgt), full)
    by_hand = sum(
        torch.nn.functional.cross_entropy(logits[b, t][None], tgt[b, t][None])
        for b, t in [(0, 0), (0, 1), (0, 2), (1, 0)]
    )
    assert torch.allclose(full, by_hand)


def test_inverse_sqrt_schedule_peaks_after_warmup() -> None:
    f = lr_lambda("inverse_sqrt", 100)
    assert f(0) == pytest.approx(0.01)
    assert f(99) == pytest.approx(1.0)
    assert f(399) == pytest.approx(0.5)
    assert lr_lambda("constant", 0)(12345) == 1.0


@pytest.mark.parametrize("arch", ["transformer", "gru"])
def test_training_writes_a_complete_run(arch: str, tiny_data_dir: Path, tmp_path: Path) -> None:
    run = tmp_path / "runs" / arch
    result = train(tiny_config(arch), run, data_dir=tiny_data_dir, log=lambda s: None,
                   progress_bar=False)
    assert (run / "config.toml").is_file() and (run / "tokenizer").is_dir()
    assert (run / "checkpoints" / "last.pt").is_file()
    assert (run / "checkpoints" / "best.pt").is_file()
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    train_losses = [r["train_loss"] for r in records if "train_loss" in r]
    assert train_losses[-1] < train_losses[0]  # it learns
    assert any(r.get("valid_bleu") is not None for r in records)
    assert result.train_loss > 0 and result.tokens_per_sec > 0
    loaded = load_run(run, "best")
    assert loaded.config == tiny_config(arch)
    payload = load_checkpoint(run / "checkpoints" / "last.pt")
    assert payload["progress"]["step"] == result.progress.step


def test_resume_continues_exactly(tiny_data_dir: Path, tmp_path: Path) -> None:
    cfg = tiny_config("transformer", "train.epochs=2")
    straight = tmp_path / "straight"
    train(cfg, straight, data_dir=tiny_data_dir, log=lambda s: None, progress_bar=False)

    class StopAt(StopFlag):
        def check(self, step: int) -> bool:
            return step >= 17  # mid-epoch, between validations and log lines

    broken = tmp_path / "broken"
    first = train(cfg, broken, data_dir=tiny_data_dir, log=lambda s: None, progress_bar=False,
                  stop=StopAt())
    assert first.progress.step == 17 and first.signal == 0  # stopped by check(), not a signal
    train(cfg, broken, data_dir=tiny_data_dir, resume=True, log=lambda s: None,
          progress_bar=False)
    a, b = read_metrics(straight), read_metrics(broken)
    assert len(a) == len(b) and len(a) > 6
    for ra, rb in zip(a, b, strict=True):
        assert ra.keys() == rb.keys()
        for k in ra:
            if isinstance(ra[k], float):
                assert ra[k] == pytest.approx(rb[k], rel=1e-5, abs=1e-6), (k, ra, rb)
            else:
                assert ra[k] == rb[k]
    wa = load_checkpoint(straight / "checkpoints" / "last.pt")["model"]
    wb = load_checkpoint(broken / "checkpoints" / "last.pt")["model"]
    for k in wa:
        assert torch.allclose(wa[k], wb[k], atol=1e-6), k


def test_existing_run_is_refused_without_resume(tiny_data_dir: Path, tmp_path: Path) -> None:
    run = tmp_path / "r"
    cfg = tiny_config("gru", "train.max_steps=2")
    train(cfg, run, data_dir=tiny_data_dir, log=lambda s: None, progress_bar=False)
    before = (run / "checkpoints" / "last.pt").read_bytes()
    with pytest.raises(NmtError, match="run directory exists"):
        train(cfg, run, data_dir=tiny_data_dir, log=lambda s: None, progress_bar=False)
    assert (run / "checkpoints" / "last.pt").read_bytes() == before


def test_cli_train_and_config_errors(tiny_data_dir: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["train", "--runs-dir", str(tmp_path), "--data-dir", str(tiny_data_dir),
            "--run-name", "cli"]
    sets = [x for s in [*TINY, "train.max_steps=3", "train.log_every=1"] for x in ("--set", s)]
    ok = runner.invoke(app, [*args, "--config", "configs/demo.toml", *sets])
    assert ok.exit_code == 0, ok.output
    assert "tokens/sec on cpu" in ok.output and "(per-token CE)" in ok.output
    # not a terminal: a line every log_every steps instead of a progress bar redrawn into the log
    lines = [x for x in ok.output.splitlines() if x.startswith("step ") and "train loss" in x]
    assert [x.split(" (")[0] for x in lines] == ["step 1", "step 2", "step 3"]
    assert "\r" not in ok.output and "it/s" not in ok.output and "step/s" not in ok.output

    bad = runner.invoke(app, [*args, "--config", "configs/demo.toml", "--set", "train.lrr=1",
                              "--run-name", "x"])
    assert bad.exit_code == 2
    assert "unknown key train.lrr" in bad.output and "Traceback" not in bad.output

    nope = str(tmp_path / "nope.toml")
    missing = runner.invoke(app, [*args, "--config", nope, "--run-name", "y"])
    assert missing.exit_code == 2 and "config file not found" in missing.output

    again = runner.invoke(app, [*args, "--config", "configs/demo.toml", *sets])
    assert again.exit_code == 1 and "--resume" in again.output

    resumed = runner.invoke(app, [*args, "--resume", "--set", "train.max_steps=5"])
    assert resumed.exit_code == 0, resumed.output
    assert load_checkpoint(tmp_path / "cli" / "checkpoints" / "last.pt")["progress"]["step"] == 5

    frozen = runner.invoke(app, [*args, "--resume", "--set", "model.d_model=32"])
    assert frozen.exit_code == 2 and "cannot change on --resume" in frozen.output


def test_nonfinite_loss_stops_and_keeps_last_good_checkpoint(
    tiny_data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import nmt.train as train_module

    run = tmp_path / "nan"
    cfg = tiny_config("transformer", "train.max_steps=15")
    calls = {"n": 0}
    real = train_module.masked_cross_entropy

    def poisoned(logits: torch.Tensor, tgt: torch.Tensor, ls: float = 0.0) -> torch.Tensor:
        loss = real(logits, tgt, ls)
        if not torch.is_grad_enabled():
            return loss  # validation
        calls["n"] += 1
        return loss * float("nan") if calls["n"] == 13 else loss

    monkeypatch.setattr(train_module, "masked_cross_entropy", poisoned)
    with pytest.raises(NmtError, match="non-finite loss at step 13"):
        train(cfg, run, data_dir=tiny_data_dir, log=lambda s: None, progress_bar=False)
    kept = load_checkpoint(run / "checkpoints" / "last.pt")
    assert kept["progress"]["step"] == 10  # the validation at step 10 saved it
    assert all(torch.isfinite(v).all() for v in kept["model"].values() if v.is_floating_point())
