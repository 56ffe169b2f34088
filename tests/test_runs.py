"""`nmt runs`: the overview of run directories, healthy, partial and broken."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
import torch
from rich.console import Console
from test_decode import make_run
from typer.testing import CliRunner

from nmt.cli import app
from nmt.config import ModelConfig
from nmt.errors import CheckpointError
from nmt.models.build import build_model, count_parameters
from nmt.runs.checkpoint import save_checkpoint
from nmt.runs.loading import load_run
from nmt.runs.table import count_state_parameters, describe_model, list_runs, runs_table

runner = CliRunner()
T0 = 1_700_000_000  # fixed modification times, so the order is known


def touch_all(run: Path, t: float) -> None:
    for p in [run, *run.rglob("*")]:
        os.utime(p, (t, t))


def scores(run: Path, name: str, bleu: float, beam: int, t: float) -> None:
    path = run / f"scores.{name}.json"
    path.write_text(json.dumps({"beam": beam, "multi": {"bleu": bleu}, "single": {"bleu": 1.0}}))
    os.utime(path, (t, t))


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    good = make_run(root / "good", "transformer", trained=False)
    (good / "metrics.jsonl").write_text(
        '{"step": 100, "epoch": 1, "valid_loss": 2.0, "valid_bleu": 20.5}\n'
        '{"step": 200, "epoch": 1, "valid_loss": 1.5, "valid_bleu": null}\n'
        '{"step": 300, "epoch": 2, "valid_loss": 1.0, "valid_bleu": 31.25}\n'
        '{"step": 400, "epoch": 2, "valid_loss": 1.0, "valid_bleu": 30.0}\n')
    touch_all(good, T0 + 300)
    scores(good, "test", 28.0, 1, T0 + 400)
    scores(good, "test.beam4", 29.5, 4, T0 + 500)  # the newest scoring is shown
    scores(good, "valid", 99.0, 1, T0 + 600)  # not the test split: ignored
    gru = make_run(root / "gru", "gru", trained=False)
    touch_all(gru, T0 + 200)
    partial = root / "partial"  # training just started: a config, no checkpoint yet
    partial.mkdir()
    (partial / "config.toml").write_text("[model]\narch = \"gru\"\nhidden = 64\n")
    touch_all(partial, T0 + 100)
    corrupt = make_run(root / "corrupt", "gru", trained=False)
    (corrupt / "checkpoints" / "last.pt").write_bytes(b"PK\x03\x04 truncated")
    (corrupt / "scores.test.json").write_text("{not json")
    touch_all(corrupt, T0)
    bad_config = root / "bad-config"
    bad_config.mkdir()
    (bad_config / "config.toml").write_text("[model]\nd_model = 'wide'\n")
    touch_all(bad_config, T0 - 100)
    (root / "empty").mkdir()
    os.utime(root / "empty", (T0 - 200, T0 - 200))
    (root / ".hidden").mkdir()
    (root / "notes.txt").write_text("not a run")
    return root


def test_healthy_run_row(runs_dir: Path) -> None:
    info = {i.name: i for i in list_runs(runs_dir)}["good"]
    loaded = load_run(runs_dir / "good", "last", "cpu")
    assert info.ok and info.note == ""
    assert info.model == "transformer 2x16 h2"
    assert info.parameters == count_parameters(loaded.model)
    assert info.steps == 200
    assert (info.best_valid_bleu, info.best_valid_step) == (31.25, 300)
    assert (info.test_bleu, info.test_beam) == (29.5, 4)
    assert info.updated == T0 + 600
    assert info.state == info.status == "unfinished"  # make_run's progress has no "finished"


def test_gru_row_and_names(runs_dir: Path) -> None:
    infos = list_runs(runs_dir)
    assert [i.name for i in infos] == [  # newest first; hidden dirs and files are not runs
        "good", "gru", "partial", "corrupt", "bad-config", "empty"]
    gru = infos[1]
    assert gru.model == "gru 2x16" and gru.best_valid_bleu is None and gru.test_bleu is None


def test_broken_and_partial_runs_get_notes(runs_dir: Path) -> None:
    infos = {i.name: i for i in list_runs(runs_dir)}
    assert (infos["partial"].state, infos["partial"].note) == ("partial", "no checkpoint yet")
    assert infos["partial"].model == "gru 2x64"  # from config.toml
    assert infos["partial"].steps is None and infos["partial"].parameters is None
    assert infos["corrupt"].state == "broken"
    assert infos["corrupt"].note == ("last.pt: corrupt or truncated checkpoint (the end of the "
                                     "archive is missing); scores.test.json unreadable")
    assert infos["corrupt"].model == "gru 2x16"  # still known from config.toml
    assert infos["bad-config"].note == "no checkpoint yet; config.toml invalid"
    assert infos["empty"].state == "not a run"
    assert infos["empty"].note == "not a run (no config.toml or checkpoint)"
    assert infos["empty"].updated is None


def test_finished_run_shows_done(tmp_path: Path) -> None:
    run = make_run(tmp_path / "r", "gru", trained=False)
    payload = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    payload["progress"] = {"step": 7, "finished": True, "stop_reason": "completed 1 epochs"}
    save_checkpoint(run / "checkpoints" / "last.pt", payload)
    (info,) = list_runs(tmp_path)
    assert (info.steps, info.state, info.status) == (7, "done", "completed 1 epochs")
    assert "done" in render(runs_table([info]))


def test_tied_weights_are_counted_once(tmp_path: Path) -> None:
    cfg = ModelConfig(d_model=16, n_heads=2, d_ff=32, n_layers=1, tie_embeddings=True)
    model = build_model(cfg, 30, 30, joint_vocab=True)
    path = tmp_path / "m.pt"
    torch.save(model.state_dict(), path)
    state = torch.load(path, weights_only=True, mmap=True)
    assert count_state_parameters(state) == count_parameters(model)
    assert sum(t.numel() for t in state.values()) > count_parameters(model)  # really tied


def test_describe_model() -> None:
    assert describe_model({"arch": "gru", "n_layers": 2, "hidden": 512,
                           "bidirectional": True}) == "gru 2x512 bi"
    assert describe_model({"arch": "transformer", "n_layers": 6, "d_model": 512,
                           "n_heads": 8}) == "transformer 6x512 h8"
    assert describe_model({"n_layers": 2}) == "? 2x?"
    assert describe_model({"arch": "lstm", "d_model": 64}) == "lstm ?x64"


def render(table: object, width: int = 80) -> str:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(table)
    return out.getvalue()


def test_table_shows_every_run_and_lists_the_problems(runs_dir: Path) -> None:
    infos = list_runs(runs_dir)
    text = render(runs_table(infos), width=100)
    for word in ("good", "en-fr", "transformer 2x16 h2", "11.4k", "31.25", "29.50 b4",
                 "unfinished", "partial*", "broken*", "not a run*", "* corrupt: last.pt: corrupt "
                 "or truncated checkpoint", "scores.test.json unreadable", "* empty: not a run "
                 "(no config.toml or checkpoint)"):
        assert word in text
    assert "good*" not in text and "* good" not in text and "* gru" not in text
    narrow = render(runs_table(infos), width=80)
    assert max(len(line.rstrip()) for line in narrow.splitlines()) <= 80
    for i in infos:
        assert i.name in narrow and i.state in narrow


def test_cli_runs(runs_dir: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["runs", "--runs-dir", str(runs_dir)], env={"COLUMNS": "160"})
    assert result.exit_code == 0
    assert "transformer 2x16 h2" in result.stdout and "not a run" in result.stdout
    (tmp_path / "none").mkdir()
    result = runner.invoke(app, ["runs", "--runs-dir", str(tmp_path / "none")])
    assert result.exit_code == 0 and result.stdout.strip() == f"no runs in {tmp_path / 'none'}"
    result = runner.invoke(app, ["runs", "--runs-dir", str(tmp_path / "missing")])
    assert result.exit_code == 1
    assert result.stderr.strip() == f"error: --runs-dir {tmp_path / 'missing'}: directory " \
                                    "not found"
    with pytest.raises(CheckpointError):
        list_runs(tmp_path / "missing")
