"""Interrupted and resumed training is the same training: validations owed at the interruption,
ties between validations, the config a resume writes, launcher variables, Ctrl-C at exit."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import invoke, run_metrics
from test_train import FAMILY, SHARED, TINY, tiny_config

from nmt.errors import NmtError
from nmt.runs.checkpoint import load_checkpoint
from nmt.training.loop import INTERRUPTED, StopFlag, TrainResult, train

ROOT = Path(__file__).resolve().parent.parent


class StopAfterOneStep(StopFlag):
    """Asks every invocation to stop after its first step, as a Ctrl-C would."""

    def check(self, step: int) -> bool:
        return True


def _same_records(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> None:
    assert [sorted(r) for r in a] == [sorted(r) for r in b]
    assert [r["step"] for r in a] == [r["step"] for r in b]
    for ra, rb in zip(a, b, strict=True):
        for k, v in ra.items():
            if isinstance(v, float):
                assert v == pytest.approx(rb[k], rel=1e-5, abs=1e-6), (k, ra, rb)
            else:
                assert v == rb[k], (k, ra, rb)


def _same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-6), k


def _checkpoints(run: Path) -> dict[str, dict[str, Any]]:
    return {name: load_checkpoint(run / "checkpoints" / f"{name}.pt") for name in ("last", "best")}


# Validation at every step (or at every epoch's end, 4 steps an epoch), a warm-up schedule, the
# weights' moving average, early stopping and log lines every 3 steps: everything a step changes.
INTERRUPTIBLE = ("train.max_steps=12", "train.patience=3", "train.lr=0.03",
                 "train.schedule=inverse_sqrt", "train.warmup_steps=4", "train.ema_decay=0.9")


@pytest.mark.parametrize("when", [("train.eval_every=1",),
                                  ("train.eval_every=0", "train.batch_size=200",
                                   "train.max_steps=0", "train.epochs=3")],
                         ids=["every step", "every epoch"])
def test_interrupted_at_every_step_then_resumed_is_the_uninterrupted_run(
    when: tuple[str, ...], tiny_data_dir: Path, tmp_path: Path
) -> None:
    """One run trained straight; another stopped after every single step (as Ctrl-C stops it:
    last.pt saved, a validation due at that step not done yet) and resumed each time. Both
    write the same metric records (train and valid lines), stop at the same step for the same
    reason, choose the same best step and end with the same weights, averaged ones included
    (before: a validation due at the interrupted step was lost for good, and with it the
    early-stopping count and the choice of best.pt)."""
    cfg = tiny_config("transformer", *INTERRUPTIBLE, *when)
    straight = train(cfg, tmp_path / "straight", data_dir=tiny_data_dir, log=lambda s: None)

    run = tmp_path / "stopped"
    result: TrainResult = train(cfg, run, data_dir=tiny_data_dir, log=lambda s: None,
                                stop=StopAfterOneStep())
    invocations = 1
    while result.progress.stop_reason == INTERRUPTED:
        assert invocations <= straight.progress.step + 1
        result = train(cfg, run, data_dir=tiny_data_dir, resume=True, log=lambda s: None,
                       stop=StopAfterOneStep())
        invocations += 1
    assert invocations == straight.progress.step + 1  # every step was an interrupted one

    _same_records(run_metrics(tmp_path / "straight"), run_metrics(run))
    a, b = _checkpoints(tmp_path / "straight"), _checkpoints(run)
    for name in ("last", "best"):
        pa, pb = a[name]["progress"], b[name]["progress"]
        assert {k: v for k, v in pa.items() if k != "elapsed"} == pytest.approx(
            {k: v for k, v in pb.items() if k != "elapsed"}), name
        _same_weights(a[name]["model"], b[name]["model"])
        _same_weights(a[name]["ema"]["weights"], b[name]["ema"]["weights"])
    assert result.progress.stop_reason == straight.progress.stop_reason
    assert (result.progress.step, result.progress.best_step) == (
        straight.progress.step, straight.progress.best_step)


class _Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs, no handler, no clean-up."""


def test_a_kill_during_the_owed_validation_does_not_record_it_twice(
    tiny_data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The resume that does an owed validation is killed after writing its metric line but
    before saving: last.pt still owes it, so the next resume does it again, and the line the
    killed one wrote is dropped with the others last.pt does not account for."""
    import nmt.training.state as train_state

    cfg = tiny_config("gru", "train.max_steps=3", "train.eval_every=1")
    train(cfg, tmp_path / "straight", data_dir=tiny_data_dir, log=lambda s: None)
    run = tmp_path / "r"
    train(cfg, run, data_dir=tiny_data_dir, log=lambda s: None, stop=StopAfterOneStep())
    real_save = train_state.save_checkpoint

    def die(path: Path, payload: dict[str, Any]) -> None:
        raise _Killed

    monkeypatch.setattr(train_state, "save_checkpoint", die)
    with pytest.raises(_Killed):
        train(cfg, run, data_dir=tiny_data_dir, resume=True, log=lambda s: None)
    assert [r["step"] for r in run_metrics(run) if "valid_loss" in r] == [1]  # written, unsaved
    monkeypatch.setattr(train_state, "save_checkpoint", real_save)
    train(cfg, run, data_dir=tiny_data_dir, resume=True, log=lambda s: None)
    _same_records(run_metrics(tmp_path / "straight"), run_metrics(run))


def _scripted_validation(monkeypatch: pytest.MonkeyPatch, losses: list[float]) -> None:
    """Every validation scores BLEU 0.0 (a young model's) and the next of ``losses``."""
    import nmt.training.validation as train_validation

    left = iter(losses)
    monkeypatch.setattr(train_validation, "validation_bleu", lambda *a, **k: 0.0)
    monkeypatch.setattr(train_validation, "validation_loss", lambda *a, **k: next(left))


TIES = [5.0, 4.0, 4.5, 3.0, 3.5, 3.6]  # one score (BLEU 0.0) for all; the loss is best at step 4
TIED = ("train.eval_every=1", "train.max_steps=10", "train.patience=2")


def test_a_tied_score_goes_to_the_lower_validation_loss(
    tiny_data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While BLEU is 0.00 at every validation, best.pt follows the validation loss and the
    early-stopping count restarts with each lower loss (before: best.pt stayed at the first
    validation and every tie counted as a failure, so this run stopped at step 3)."""
    _scripted_validation(monkeypatch, TIES)
    run = tmp_path / "r"
    result = train(tiny_config("gru", *TIED), run, data_dir=tiny_data_dir, log=lambda s: None)
    assert (result.progress.step, result.progress.best_step) == (6, 4)
    assert result.progress.stop_reason.startswith("early stopping")
    best = load_checkpoint(run / "checkpoints" / "best.pt")["progress"]
    assert (best["step"], best["best_loss"]) == (4, 3.0)


@pytest.mark.parametrize("checkpoint", ["as saved", "from before best_loss"])
def test_the_tie_break_survives_a_resume(
    checkpoint: str, tiny_data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Interrupted at step 5 (after the best validation, at step 4), then resumed: the loss
    that breaks ties comes back from last.pt, or, for a checkpoint written before it was
    saved, from the validation line of its best step in metrics.jsonl. Without it, step 5's
    higher loss (3.5) would beat an unknown one and take best.pt."""
    from nmt.runs.checkpoint import save_checkpoint

    class StopAt5(StopFlag):
        def check(self, step: int) -> bool:
            return step >= 5

    _scripted_validation(monkeypatch, TIES)
    run = tmp_path / "r"
    cfg = tiny_config("gru", *TIED)
    first = train(cfg, run, data_dir=tiny_data_dir, log=lambda s: None, stop=StopAt5())
    assert (first.progress.step, first.progress.best_loss) == (5, 3.0)
    if checkpoint == "from before best_loss":
        path = run / "checkpoints" / "last.pt"
        payload = load_checkpoint(path)
        del payload["progress"]["best_loss"]
        save_checkpoint(path, payload)
    result = train(cfg, run, data_dir=tiny_data_dir, resume=True, log=lambda s: None)
    assert (result.progress.step, result.progress.best_step) == (6, 4)
    assert load_checkpoint(run / "checkpoints" / "best.pt")["progress"]["step"] == 4


def _cli_args(runs: Path, data: Path) -> list[str]:
    return ["train", "--runs-dir", str(runs), "--data-dir", str(data), "--run-name", "r"]


def _sets(*extra: str) -> list[str]:
    return [x for s in [*TINY, *extra] for x in ("--set", s)]


@pytest.mark.parametrize("failure", [
    "non-finite loss",
    pytest.param("full disk", marks=pytest.mark.skipif(not Path("/dev/full").exists(),
                                                       reason="needs /dev/full"))])
def test_a_failed_resume_leaves_the_run_config_as_it_was(
    failure: str, tiny_data_dir: Path, tmp_path: Path
) -> None:
    """--resume --set ... that fails before it saves a checkpoint (a loss that overflows within
    a few steps, before the first validation is due; the disk full when train.log gets its
    first line) leaves config.toml as it was, so it still describes last.pt (before: rewritten
    with the new settings first). A resume that saves records its settings."""
    runs = tmp_path / "runs"
    gru = [x for s in [*SHARED, *FAMILY["gru"], "train.max_steps=2", "train.threads=1"]
           for x in ("--set", s)]
    code, out, err = invoke(*_cli_args(runs, tiny_data_dir), "--config", "configs/gru.toml", *gru)
    assert code == 0 and "over steps 1-2 (this invocation)" in out, out + err
    config = (runs / "r" / "config.toml").read_bytes()
    change = ["train.max_steps=9"]
    with pytest.MonkeyPatch.context() as mp:
        if failure == "non-finite loss":
            change += ["train.lr=1e38", "train.clip_norm=0"]
        else:
            from test_reliability_runs import _enospc_after

            _enospc_after(mp, "train.log", 0)
        code, _, err = invoke(*_cli_args(runs, tiny_data_dir), "--resume",
                              *[x for s in change for x in ("--set", s)])
    assert code == 1 and "Traceback" not in err, err
    assert ("error: non-finite loss at step " if failure == "non-finite loss" else
            f"error: {runs}/r/train.log: cannot write (No space left on device)"
            ) in err.splitlines()[-1], err
    assert (runs / "r" / "config.toml").read_bytes() == config
    code, out, err = invoke(*_cli_args(runs, tiny_data_dir), "--resume",
                            "--set", "train.max_steps=4")
    # the loss printed is this invocation's, and says so (the run's first steps are not in it)
    assert code == 0 and "over steps 3-4 (this invocation)" in out, out + err
    assert "max_steps = 4\n" in (runs / "r" / "config.toml").read_text()  # saved: recorded



def test_a_run_config_edited_by_hand_follows_one_rule(tiny_data_dir: Path,
                                                      tmp_path: Path) -> None:
    """runs/NAME/config.toml edited by hand: its [train] and [decode] take effect (the next
    --resume trains by the first; translate, bleu and export decode by the second, as
    validation after a resume does), its [data] and [model] must stay those the checkpoints
    were trained with, on --resume and in translate alike (before: [decode] edits were
    ignored by translate while [train] edits were honoured on --resume)."""
    from nmt.runs.directory import config_for_resume
    from nmt.runs.loading import load_run
    from nmt.translation.translator import Translator

    run = tmp_path / "r"
    train(tiny_config("gru", "train.max_steps=2"), run, data_dir=tiny_data_dir,
          log=lambda s: None)
    path = run / "config.toml"
    text = path.read_text()
    assert "max_steps = 2\n" in text and "max_len_cap = 256\n" in text
    path.write_text(text.replace("max_steps = 2\n", "max_steps = 3\n").replace(
        "max_len_cap = 256\n", "max_len_cap = 2\n"))

    loaded = load_run(run, "last")
    assert loaded.config.decode.max_len_cap == 2
    assert all(len(x.split()) <= 2 for x in Translator.from_run(loaded).translate(
        ["I see the big dog.", "They like the small car."]))
    result = train(config_for_resume(run, []), run, data_dir=tiny_data_dir, resume=True,
                   log=lambda s: None)
    assert result.progress.step == 3
    assert load_checkpoint(run / "checkpoints" / "last.pt")["config"]["decode"][
        "max_len_cap"] == 2

    path.write_text(path.read_text().replace("dropout = 0.1\n", "dropout = 0.3\n"))
    code, out, err = invoke("translate", "--run", str(run), "I see the dog.")
    assert (code, out) == (2, "")
    assert err == (f"error: {path}: [model] cannot change after training (model.dropout is "
                   "0.3, but the checkpoint was trained with 0.1); start a new run instead\n")
    with pytest.raises(NmtError, match=r"config.toml: \[model\] cannot change on --resume"):
        config_for_resume(run, [])


LAUNCHER = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


ENVIRONMENT = [  # variables set (the launcher's are unset otherwise), the error they give
    ({"WORLD_SIZE": "abc"}, "WORLD_SIZE='abc': expected a whole number from 1 to "),
    ({"WORLD_SIZE": "-2"}, "WORLD_SIZE='-2': expected a whole number from 1 to "),
    ({"WORLD_SIZE": "2"}, "RANK: not set, but WORLD_SIZE is more than 1 (set by torchrun; "),
    ({"WORLD_SIZE": "2", "RANK": "2"}, "RANK='2': expected a whole number from 0 to 1 "),
    ({"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "first"}, "LOCAL_RANK='first': expected "),
    ({"WORLD_SIZE": "2", "RANK": "1"}, "MASTER_ADDR: not set, but WORLD_SIZE is more than 1"),
    ({"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "localhost", "MASTER_PORT": "http"},
     "MASTER_PORT='http': expected a whole number from 1 to 65535 "),
    ({"NMT_NO_PROGRESS": "yes"}, "NMT_NO_PROGRESS='yes': expected 1 (a line every log_every "),
    ({"NMT_CORPUS_SHA256": "abc"}, "NMT_CORPUS_SHA256='abc': expected a SHA-256 digest "),
]


@pytest.mark.parametrize(("env", "message"), ENVIRONMENT,
                         ids=[" ".join(f"{k}={v}" for k, v in e.items()) for e, _ in ENVIRONMENT])
def test_environment_variables_are_checked_and_named(
    env: dict[str, str], message: str, tiny_data_dir: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every environment variable nmt reads that holds something else than it expects is a
    one-line error naming it, before anything is trained or written (before: `WORLD_SIZE=abc`
    was a ValueError traceback, `WORLD_SIZE=2` without `RANK` a KeyError)."""
    for name in LAUNCHER:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    runs = tmp_path / "runs"
    code, out, err = invoke(*_cli_args(runs, tiny_data_dir), "--config", "configs/demo.toml",
                            *_sets("train.max_steps=1"))
    assert code in (1, 2) and "Traceback" not in err, err
    assert err.splitlines()[-1].startswith(f"error: {message}"), err
    assert not (runs / "r").exists() or not any((runs / "r").iterdir())


def test_ctrl_c_during_the_clean_up_at_exit_ends_quietly_with_130(tmp_path: Path) -> None:
    """A Ctrl-C that lands while the interpreter runs its atexit callbacks (torch's, tqdm's,
    matplotlib's, ...) after a command ends it at once with status 130, printing nothing
    (before: Python's `Exception ignored in atexit callback` traceback, and status 0). The
    callback here is the test's own, which sends the SIGINT itself."""
    script = textwrap.dedent("""
        import atexit, os, signal, sys, time
        from nmt.cli import main

        def clean_up():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(60)
            print("clean-up finished", file=sys.stderr)

        atexit.register(clean_up)
        sys.argv = ["nmt", "runs", "--runs-dir", sys.argv[1]]
        main()
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stderr) == (130, ""), proc.stderr
    assert proc.stdout == f"no runs in {tmp_path}\n"


def test_a_config_name_that_cannot_name_a_run_is_blamed_on_config(
    tiny_data_dir: Path, tmp_path: Path
) -> None:
    """A config file whose name is not valid UTF-8 (or is otherwise no directory name) names
    the run by default: the error names --config, not the --run-name that was not given."""
    config = tmp_path / os.fsdecode(b"demo\xff.toml")
    config.write_bytes((ROOT / "configs" / "demo.toml").read_bytes())
    runs = tmp_path / "runs"
    args = ["train", "--runs-dir", str(runs), "--data-dir", str(tiny_data_dir),
            "--config", str(config)]
    code, out, err = invoke(*args, *_sets("train.max_steps=1"))
    shown = str(config).replace("\udcff", "\\udcff")  # as stderr writes it
    assert code == 1 and err == (f"error: --config {shown}: the file's name 'demo\\udcff' "
                                 "cannot name the run's directory; choose one with "
                                 "--run-name\n"), err
    assert not runs.exists()
    code, out, err = invoke(*args, "--run-name", "x", "--set", "train.lrr=1")  # the file is read
    assert code == 2 and "unknown key train.lrr" in err, err
