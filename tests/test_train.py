"""Training: loss, clipping, exact resume, interruption, run directories, CLI errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import run_metrics
from typer.testing import CliRunner

from nmt.cli import app
from nmt.config import Config, load_config
from nmt.data.tokenizers import PAD_ID
from nmt.errors import NmtError
from nmt.runs.checkpoint import load_checkpoint
from nmt.runs.loading import load_run
from nmt.training.cost import training_flops_per_target_token
from nmt.training.loop import Display, StopFlag, masked_cross_entropy, train
from nmt.training.optim import lr_lambda

SHARED = [
    "data.tokenizer=word", "data.min_freq=1", "data.valid_frac=0.1", "data.test_frac=0.1",
    "model.d_model=16", "model.n_layers=1",
    "train.batch_size=32", "train.epochs=1", "train.eval_every=10", "train.eval_sentences=20",
    "train.log_every=3", "train.device=cpu", "train.lr=0.003",
]
FAMILY = {"transformer": ["model.d_ff=32", "model.n_heads=2"], "gru": ["model.hidden=16"]}
TINY = [*SHARED, *FAMILY["transformer"]]  # a tiny Transformer (the default arch)


def tiny_config(arch: str = "transformer", *extra: str) -> Config:
    return load_config(None, [*SHARED, *FAMILY[arch], f"model.arch={arch}", *extra])




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
    result = train(tiny_config(arch), run, data_dir=tiny_data_dir, log=lambda s: None)
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


def test_a_resume_that_turns_the_average_on_averages_every_step_after(
        tiny_data_dir: Path, tmp_path: Path) -> None:
    """A run trained without ``train.ema_decay`` and resumed with it starts an average from its
    weights at the resume, and each step after updates that average (the one saved and
    scored)."""
    run = tmp_path / "run"
    train(tiny_config("transformer", "train.max_steps=2", "train.eval_every=100"), run,
          data_dir=tiny_data_dir, log=lambda s: None)
    train(tiny_config("transformer", "train.max_steps=5", "train.eval_every=100",
                      "train.ema_decay=0.9"), run, data_dir=tiny_data_dir, resume=True,
          log=lambda s: None)
    saved = load_checkpoint(run / "checkpoints" / "last.pt")
    assert saved["ema"]["updates"] == 3
    assert any(not torch.equal(saved["ema"]["weights"][k], saved["model"][k])
               for k in saved["model"])


@pytest.mark.parametrize("ema", ["train.ema_decay=0", "train.ema_decay=0.9"])
def test_resume_continues_exactly(ema: str, tiny_data_dir: Path, tmp_path: Path) -> None:
    cfg = tiny_config("transformer", "train.epochs=2", ema)
    straight = tmp_path / "straight"
    train(cfg, straight, data_dir=tiny_data_dir, log=lambda s: None)

    class StopAt(StopFlag):
        def check(self, step: int) -> bool:
            return step >= 17  # mid-epoch, between validations and log lines

    broken = tmp_path / "broken"
    first = train(cfg, broken, data_dir=tiny_data_dir, log=lambda s: None,
                  stop=StopAt())
    assert first.progress.step == 17 and first.signal == 0  # stopped by check(), not a signal
    train(cfg, broken, data_dir=tiny_data_dir, resume=True, log=lambda s: None)
    a, b = run_metrics(straight), run_metrics(broken)
    assert len(a) == len(b) and len(a) > 6
    for ra, rb in zip(a, b, strict=True):
        assert ra.keys() == rb.keys()
        for k in ra:
            if isinstance(ra[k], float):
                assert ra[k] == pytest.approx(rb[k], rel=1e-5, abs=1e-6), (k, ra, rb)
            else:
                assert ra[k] == rb[k]
    pa = load_checkpoint(straight / "checkpoints" / "last.pt")
    pb = load_checkpoint(broken / "checkpoints" / "last.pt")
    assert ("ema" in pa) == ("ema" in pb) == (cfg.train.ema_decay > 0)
    weights = [(pa["model"], pb["model"])]
    if "ema" in pa:  # the average resumes exactly too
        assert pa["ema"]["updates"] == pb["ema"]["updates"] == pa["progress"]["step"]
        weights.append((pa["ema"]["weights"], pb["ema"]["weights"]))
        assert any(not torch.equal(pa["ema"]["weights"][k], pa["model"][k]) for k in pa["model"])
    for wa, wb in weights:
        for k in wa:
            assert torch.allclose(wa[k], wb[k], atol=1e-6), k


def test_resume_takes_the_learning_rate_and_betas_of_the_config(
        tiny_data_dir: Path, tmp_path: Path) -> None:
    """--resume --set train.lr=...: the new rate from the next step on (the saved optimizer
    state used to bring the old one back while config.toml recorded the new one)."""
    run = tmp_path / "run"
    train(tiny_config("transformer"), run, data_dir=tiny_data_dir, log=lambda s: None)
    steps = load_checkpoint(run / "checkpoints" / "last.pt")["progress"]["step"]
    cfg = tiny_config("transformer", "train.epochs=2", "train.lr=0.0005", "train.beta2=0.95")
    train(cfg, run, data_dir=tiny_data_dir, resume=True, log=lambda s: None)
    after = [r for r in run_metrics(run) if "lr" in r and r["step"] > steps]
    assert after and all(r["lr"] == pytest.approx(0.0005) for r in after)
    groups = load_checkpoint(run / "checkpoints" / "last.pt")["optimizer"]["param_groups"]
    assert all(g["betas"] == (0.9, 0.95) and g["lr"] == pytest.approx(0.0005) for g in groups)


def test_existing_run_is_refused_without_resume(tiny_data_dir: Path, tmp_path: Path) -> None:
    run = tmp_path / "r"
    cfg = tiny_config("gru", "train.max_steps=2")
    train(cfg, run, data_dir=tiny_data_dir, log=lambda s: None)
    before = (run / "checkpoints" / "last.pt").read_bytes()
    with pytest.raises(NmtError, match="run directory exists"):
        train(cfg, run, data_dir=tiny_data_dir, log=lambda s: None)
    assert (run / "checkpoints" / "last.pt").read_bytes() == before


def test_a_start_that_failed_is_kept_and_named_as_such(tiny_data_dir: Path,
                                                      tmp_path: Path) -> None:
    run = tmp_path / "r"
    with pytest.raises(NmtError, match="model.max_positions: expected at least"):
        train(tiny_config("transformer", "model.max_positions=3"), run, data_dir=tiny_data_dir,
              log=lambda s: None)
    (run / "notes.txt").write_text("mine")
    with pytest.raises(NmtError, match="holds no checkpoint to resume .* --overwrite"):
        train(tiny_config("transformer"), run, data_dir=tiny_data_dir, log=lambda s: None)
    assert (run / "notes.txt").read_text() == "mine"


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
    # not a terminal: every line whole, however long (grep reads them), the last one included
    end = f"{tmp_path / 'cli'}: reached max_steps=3; step 3, best valid score "
    assert len(end) > 80 and any(x.startswith(end) and " at step " in x
                                 for x in ok.output.splitlines()), ok.output

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

    # --config with --resume: the file's [train] takes effect; its [model] must be the run's
    other = runner.invoke(app, [*args, "--resume", "--config", "configs/d2l-gru.toml"])
    assert other.exit_code == 2 and "--config configs/d2l-gru.toml: [data] cannot change" in (
        other.output), other.output
    same = tmp_path / "same.toml"
    same.write_text((tmp_path / "cli" / "config.toml").read_text().replace(
        "max_steps = 5", "max_steps = 6"))
    more = runner.invoke(app, [*args, "--resume", "--config", str(same)])
    assert more.exit_code == 0, more.output
    assert load_checkpoint(tmp_path / "cli" / "checkpoints" / "last.pt")["progress"]["step"] == 6

    # resuming a finished run trains nothing more and says so
    done = runner.invoke(app, [*args, "--resume"])
    assert done.exit_code == 0 and "nothing left to train" in done.output, done.output
    assert "tokens/sec" not in done.output
    assert load_checkpoint(tmp_path / "cli" / "checkpoints" / "last.pt")["progress"]["step"] == 6

    budget = runner.invoke(app, [*args[:-1], "budget", "--config", "configs/demo.toml",
                                 *[x for s in TINY for x in ("--set", s)],
                                 "--max-minutes", "0.00001"])
    flat = " ".join(budget.output.split())  # the console wraps long lines
    assert budget.exit_code == 0 and "time budget of 1e-05 min; step 1," in flat, flat

    for name in ("../escape", "", ".", "a/b"):
        bad_name = runner.invoke(app, [*args[:-1], name, "--config", "configs/demo.toml"])
        assert bad_name.exit_code == 1 and "--run-name" in bad_name.output, (name, bad_name.output)
        assert len(bad_name.output.strip().splitlines()) == 1
    assert not (tmp_path.parent / "escape").exists()


def test_training_loss_reports_cross_entropy_under_label_smoothing() -> None:
    from nmt.training.loop import training_loss

    torch.manual_seed(0)
    logits = torch.randn(3, 5, 11, requires_grad=True)
    tgt = torch.tensor([[3, 4, 5, PAD_ID, PAD_ID], [6, 7, 8, 9, 10], [2, PAD_ID] + [PAD_ID] * 3])
    objective, nll = training_loss(logits, tgt, 0.1)
    assert torch.allclose(objective, masked_cross_entropy(logits, tgt, 0.1), atol=1e-5)
    assert torch.allclose(nll, masked_cross_entropy(logits, tgt), atol=1e-5)
    assert not nll.requires_grad and objective.requires_grad
    expected = torch.autograd.grad(masked_cross_entropy(logits, tgt, 0.1), logits)[0]
    assert torch.allclose(torch.autograd.grad(objective, logits)[0], expected, atol=1e-6)
    plain, plain_nll = training_loss(logits, tgt, 0.0)
    assert torch.equal(plain, plain_nll)


def test_gradient_accumulation_equals_one_batch_of_both(tiny_data_dir: Path) -> None:
    """Two batches accumulated into one step train exactly as one batch holding both."""
    import numpy as np

    from nmt.data.batching import Collator
    from nmt.data.prepare import prepare
    from nmt.models.build import build_model
    from nmt.runs.directory import MetricsLog
    from nmt.training.distributed import Dist
    from nmt.training.loop import Display, Progress, Run, TrainingState, train_step
    from nmt.training.optim import build_optimizer

    cfg = tiny_config("transformer", "model.dropout=0.0")
    prepared = prepare(cfg.data, tiny_data_dir, log=lambda s: None)
    tok, split = prepared.tokenizer, prepared.splits["train"]
    collator = Collator(split, truncate=0)
    first, second = np.arange(0, 7), np.arange(40, 52)  # different lengths and sizes
    run = Run(cfg, tiny_data_dir, Dist(), torch.device("cpu"), prepared,
              MetricsLog(tiny_data_dir, enabled=False), {}, Display(), elapsed0=0.0)

    def one_step(group: list) -> tuple[list[torch.Tensor], float, int]:
        torch.manual_seed(0)
        model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size,
                            joint_vocab=tok.joint)
        optimizer, scheduler = build_optimizer(cfg.train, model)
        state = TrainingState(model, optimizer, scheduler, None, Progress())
        _, loss, n = train_step(model, state, group, collator, run)
        return [p.detach().clone() for p in model.parameters()], loss, n

    accumulated = one_step([first, second])
    together = one_step([np.concatenate([first, second])])
    assert accumulated[2] == together[2] and accumulated[1] == pytest.approx(together[1])
    for a, b in zip(accumulated[0], together[0], strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_every_batch_is_trained_whatever_the_accumulation(tiny_data_dir: Path,
                                                           tmp_path: Path) -> None:
    """An epoch's batches that do not fill a whole accumulation group make a smaller last
    step; more accumulation than an epoch has batches makes one step an epoch."""
    steps, tokens = {}, {}
    for accum in (1, 3, 1000):
        result = train(tiny_config("gru", "train.epochs=2", "train.eval_every=0",
                                   f"train.accum_steps={accum}"),
                       tmp_path / f"a{accum}", data_dir=tiny_data_dir, log=lambda s: None)
        steps[accum], tokens[accum] = result.progress.step, result.progress.tokens
    per_epoch = steps[1] // 2
    assert per_epoch % 3 != 0  # so that accumulating 3 leaves a remainder
    assert steps[3] == 2 * -(-per_epoch // 3) and steps[1000] == 2
    assert tokens[1] == tokens[3] == tokens[1000]


@pytest.mark.parametrize("ends", [
    ("train.max_steps=12",), ("train.eval_every=0",),  # by steps, by epochs
    ("train.max_minutes=0.00001",),  # by the time budget (after its first step)
    ("train.eval_every=1", "train.patience=1", "train.lr=0.5", "train.epochs=5"),  # early stop
], ids=["steps", "epochs", "time", "patience"])
def test_resuming_a_finished_run_adds_nothing(ends: tuple[str, ...], tiny_data_dir: Path,
                                              tmp_path: Path) -> None:
    run = tmp_path / "run"
    cfg = tiny_config("transformer", *ends)
    first = train(cfg, run, data_dir=tiny_data_dir, log=lambda s: None)
    reason = first.progress.stop_reason
    expected = {"train.max_steps=12": "reached", "train.eval_every=0": "completed",
                "train.max_minutes=0.00001": "time", "train.eval_every=1": "early"}[ends[0]]
    assert reason.startswith(expected), reason
    metrics = (run / "metrics.jsonl").read_text()
    step = load_checkpoint(run / "checkpoints" / "last.pt")["progress"]["step"]
    again = train(cfg, run, data_dir=tiny_data_dir, resume=True, log=lambda s: None)
    assert again.tokens == 0 and again.progress.step == step
    assert (again.progress.stop_reason or reason).split()[0] == reason.split()[0]
    # no step past the end, no second validation of the same weights
    assert (run / "metrics.jsonl").read_text() == metrics


def test_a_checkpoint_from_before_last_eval_step_is_not_validated_twice(
    tiny_data_dir: Path, tmp_path: Path
) -> None:
    from nmt.runs.checkpoint import save_checkpoint

    run = tmp_path / "old"
    cfg = tiny_config("transformer", "train.max_steps=12")
    train(cfg, run, data_dir=tiny_data_dir, log=lambda s: None)
    path = run / "checkpoints" / "last.pt"
    payload = load_checkpoint(path)
    del payload["progress"]["last_eval_step"]  # as written by the earlier code
    save_checkpoint(path, payload)
    metrics = (run / "metrics.jsonl").read_text()
    again = train(cfg, run, data_dir=tiny_data_dir, resume=True, log=lambda s: None)
    assert again.tokens == 0 and (run / "metrics.jsonl").read_text() == metrics


def test_validation_records_name_the_epoch_they_close(tiny_data_dir: Path,
                                                      tmp_path: Path) -> None:
    run = tmp_path / "epochs"
    train(tiny_config("gru", "train.epochs=2", "train.eval_every=0", "train.log_every=1"), run,
          data_dir=tiny_data_dir, log=lambda s: None)
    records = run_metrics(run)
    assert [r["epoch"] for r in records if "valid_loss" in r] == [1, 2]
    train_epochs = [r["epoch"] for r in records if "train_loss" in r]
    assert train_epochs == sorted(train_epochs) and set(train_epochs) == {1, 2}


def test_the_terminal_says_each_validation_as_the_log_does_best_included(
        tiny_data_dir: Path, tmp_path: Path) -> None:
    """What a user watching ``nmt train`` reads after a validation is train.log's line, with
    "(best)" where best.pt was saved (the log alone said so before)."""
    class Lines(Display):
        def __init__(self) -> None:
            self.lines: list[str] = []

        def validation(self, line: str) -> None:
            self.lines.append(line)

    run, shown = tmp_path / "said", Lines()
    train(tiny_config("transformer", "train.max_steps=6", "train.eval_every=2"), run,
          data_dir=tiny_data_dir, log=lambda s: None, display=shown)
    logged = [line.split(" ", 2)[2] for line in (run / "train.log").read_text().splitlines()
              if ": valid loss" in line]
    assert len(shown.lines) == 3 and shown.lines == logged
    best = load_checkpoint(run / "checkpoints" / "best.pt")["progress"]["best_step"]
    marked = [line.split(":")[0] for line in shown.lines if line.endswith(" (best)")]
    assert marked[0] == "step 2" and marked[-1] == f"step {best}"  # the first is the best so far


def test_metrics_file_exists_before_its_first_line(tiny_data_dir: Path, tmp_path: Path) -> None:
    run = tmp_path / "quiet"
    train(tiny_config("gru", "train.max_steps=2", "train.log_every=100", "data.valid_frac=0.0"),
          run, data_dir=tiny_data_dir, log=lambda s: None)
    assert (run / "metrics.jsonl").read_text() == ""


def test_fp16_is_refused_before_anything_is_written(tiny_data_dir: Path, tmp_path: Path) -> None:
    from nmt.errors import ConfigError

    with pytest.raises(ConfigError, match="train.precision: fp16 does not train"):
        train(tiny_config("gru", "train.precision=fp16"), tmp_path / "t", data_dir=tiny_data_dir,
              log=lambda s: None)
    assert not (tmp_path / "t").exists()


def test_more_threads_than_usable_cpus_trains_with_a_note(
        tiny_data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A config asking for more threads than the process may use (the demo's 2 under
    `taskset -c 0`) trains on the CPUs there are, and says so in one line."""
    import nmt.device

    monkeypatch.setattr(nmt.device, "usable_cpus", lambda: 1)
    lines: list[str] = []
    result = train(tiny_config("gru", "train.threads=2", "train.max_steps=2"), tmp_path / "t",
                   data_dir=tiny_data_dir, log=lines.append)
    assert result.progress.step == 2
    assert "train.threads = 2, but this process may use 1 CPU: training with 1 thread" in lines
    assert torch.get_num_threads() == 1


def test_final_line_gives_flops_and_share_of_the_cpu_peak(
        tiny_data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    import nmt.training.cost
    from nmt.data.prepare import prepare

    peak = nmt.training.cost.CpuPeak(1, 8, "AVX2", 2, 1000.0, "test")  # 32 GFLOP/s
    monkeypatch.setattr(nmt.training.cost, "this_cpu_fp32_peak", lambda threads: peak)
    sets = [x for s in [*TINY, "train.max_steps=3"] for x in ("--set", s)]
    out = CliRunner().invoke(app, ["train", "--runs-dir", str(tmp_path), "--data-dir",
                                   str(tiny_data_dir), "--config", "configs/demo.toml", *sets])
    assert out.exit_code == 0, out.output
    line = next(x for x in out.output.splitlines() if x.startswith("train loss "))
    found = re.fullmatch(r"train loss [0-9.]+ \(per-token CE\) and ([0-9,]+) tokens/sec on cpu, "
                         r"([0-9.,]+) GFLOP/s \(([0-9.,]+)% of this CPU's fp32 peak\), over "
                         r"steps 1-3 \(this invocation\)", line)
    assert found, line
    tokens_per_sec, gflops, share = (float(g.replace(",", "")) for g in found.groups())
    # the FLOPs are the model's count at the training split's mean lengths (with <eos>)
    cfg = load_config(Path("configs/demo.toml"), TINY)
    split = prepare(cfg.data, tiny_data_dir, log=lambda s: None)
    per_token = training_flops_per_target_token(
        cfg.model, split.tokenizer.tgt_vocab_size,
        float(split.splits["train"].src_lengths().mean()) + 1,
        float(split.splits["train"].tgt_lengths().mean()) + 1)
    # tokens/s is printed as a whole number: on a busy machine a tiny model runs a few, and
    # that rounding alone moves the product by up to 0.5 / tokens_per_sec
    assert gflops == pytest.approx(tokens_per_sec * per_token / 1e9,
                                   rel=0.01 + 0.5 / tokens_per_sec)
    assert share == pytest.approx(100 * gflops / 32, rel=0.01)



def test_the_time_budget_says_when_it_will_cut_a_fixed_step_run_short() -> None:
    from nmt.config import TrainConfig
    from nmt.training.loop import time_budget_warning

    t = TrainConfig(max_steps=12_000, max_minutes=60)
    line = time_budget_warning(t, 20, 8.0, 0.4)  # 8 s + 11,980 x 0.4 s = 80 min > 60
    assert line == ("warning: at 0.4 s a step, the 12,000 steps of train.max_steps take about "
                    "80.0 min; train.max_minutes = 60 stops training near step 9,000 (raise "
                    "train.max_minutes, or lower train.max_steps)")
    assert time_budget_warning(t, 20, 8.0, 0.25) is None  # 50 min: within the budget
    assert time_budget_warning(TrainConfig(max_steps=12_000), 20, 8.0, 10.0) is None  # no budget
    assert time_budget_warning(TrainConfig(max_minutes=1), 20, 8.0, 10.0) is None  # no steps
    assert time_budget_warning(t, 12_000, 8.0, 10.0) is None


def test_nmt_train_warns_early_when_the_budget_is_short(tiny_data_dir: Path,
                                                        tmp_path: Path) -> None:
    """A budget of 3 seconds for 100,000 steps: said after the first steps, in the terminal's
    lines and in the run's log, not only at the end."""
    from conftest import invoke

    sets = [x for s in [*TINY, "train.max_steps=100000", "train.max_minutes=0.05",
                        "train.eval_every=0", "train.eval_sentences=-1"] for x in ("--set", s)]
    code, out, err = invoke("train", "--config", "configs/demo.toml", "--runs-dir",
                            str(tmp_path / "runs"), "--run-name", "short", "--data-dir",
                            str(tiny_data_dir), *sets)
    assert code == 0, err
    said = [line for line in (out + err).splitlines() if "stops training near step" in line]
    assert len(said) == 1 and "train.max_minutes = 0.05" in said[0]
    log = (tmp_path / "runs" / "short" / "train.log").read_text()
    assert "stops training near step" in log
