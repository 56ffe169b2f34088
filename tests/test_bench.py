"""The benchmarks of bench/ on tiny settings: per-child peak memory, fixed-step training children,
the alternation and ratios against the recipe (with a stand-in recipe script), the report."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

import bench.run as driver
import bench.training as training
from bench.processes import ChildRun, run_child
from nmt.errors import NmtError

# A stand-in for d2l_recipe.py: logs its call, prints the recipe's JSON line; 100 tokens/s with
# one thread, 50 with torch's default (so the two ratios differ and cannot be swapped unseen).
FAKE_RECIPE = """\
import json, os, sys
with open(os.environ["BENCH_CALLS"], "a") as f:
    f.write(json.dumps(["recipe", sys.argv[2], sys.argv[3], os.environ.get("OMP_NUM_THREADS")]))
    f.write("\\n")
one_thread = os.environ.get("OMP_NUM_THREADS") == "1"
if not one_thread and os.environ.get("BENCH_SHIPPED_HANGS"):
    import time
    time.sleep(60)
print("some chatter first")
print(json.dumps({"model": sys.argv[2], "epochs": int(sys.argv[3]),
                  "tokens_per_sec": 100.0 if one_thread else 50.0, "seconds": 2.0}))
import time
time.sleep(0.2)  # lives for several of run_child's memory readings, as a real recipe does
"""

TINY_TRANSFORMER = """\
[data]
vocab_size = 64
valid_frac = 0.1
test_frac = 0.1
[model]
arch = "transformer"
d_model = 16
n_heads = 2
d_ff = 16
n_layers = 1
[train]
epochs = 50
batch_size = 16
threads = 1
log_every = 1
"""


@pytest.fixture()
def fake_recipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    script, calls = tmp_path / "fake_recipe.py", tmp_path / "calls.jsonl"
    script.write_text(FAKE_RECIPE, encoding="utf-8")
    monkeypatch.setenv("BENCH_CALLS", str(calls))
    return script, calls


def _calls(path: Path) -> list[list[Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_peak_memory_is_each_childs_own() -> None:
    # the big child frees its 300 MB before it exits: only a high-water mark can see them
    big = run_child([sys.executable, "-c", "import time; b = b'x' * (300 * 2**20); "
                           "del b; time.sleep(0.3); print('ok')"])
    small = run_child([sys.executable, "-c", "import time; time.sleep(0.3)"])
    assert big.returncode == 0 and big.stdout.strip() == "ok"
    assert big.peak_rss_mb >= 300
    # neither the big child before it nor this test process (torch imported: > 200 MB) counts
    assert small.peak_rss_mb < 100


def test_peak_memory_of_a_child_too_short_to_poll() -> None:
    # it allocates 600 MB, and more than this process has held (the kernel's peak counts the
    # memory held at the fork, so earlier tests in this process must not outgrow it), and exits
    # before a second reading: the kernel's peak at exit says what the readings could not
    from bench.processes import _vm_hwm_kb

    mb = max(600, _vm_hwm_kb(os.getpid()) // 1024 + 200)
    script = f"b = b'x' * ({mb} * 2**20)"
    assert run_child([sys.executable, "-c", script], poll=5.0).peak_rss_mb >= mb


def test_child_failure_and_missing_result_are_one_line_errors() -> None:
    failed = run_child([sys.executable, "-c", "import sys; sys.exit('boom\\nlast words')"])
    assert failed.returncode == 1
    with pytest.raises(NmtError, match="^recipe gru: exited with status 1: last words$"):
        failed.last_json("recipe gru")
    with pytest.raises(NmtError, match="printed no JSON result line"):
        ChildRun(0, 1.0, 1.0, "no json here\n", "").last_json("x")


def test_training_child_runs_the_fixed_steps_and_times_each(
    tiny_data_dir: Path, tmp_path: Path
) -> None:
    config = tmp_path / "tiny.toml"
    config.write_text(TINY_TRANSFORMER, encoding="utf-8")
    row = training.measure_train(config, [*training.CPU_OVERRIDES, "train.max_steps=4"],
                              stop_after=4, warmup=1, data_dir=tiny_data_dir)
    assert row["steps"] == 4 and len(row["step_seconds"]) == 4
    assert row["tokens"] > 0 and row["tokens_per_sec"] > 0 and row["steady_tokens_per_sec"] > 0
    assert row["device"] == "cpu" and row["threads"] == 1
    assert row["peak_rss_mb"] > 50  # torch alone is more than that
    table = driver.markdown({"machine": driver.machine(), "command": "c", "load_start": [1.0],
                            "load_end": [2.0], "seconds": 3.0, "train": [row]})
    assert "| tiny.toml | 4 |" in table and f"{row['peak_rss_mb']:,}" in table
    # the compute figures: FLOPs per token times the steady speed, over the CPU's peak
    assert row["flops_per_token"] > 0
    cells = training.compute_cells({**row, "cpu_peak_flops": 1e9}, 1000.0)
    per_token = row["flops_per_token"]
    assert cells.startswith(f"{per_token / 1e6:.2f} | ")
    assert float(cells.split(" | ")[2].rstrip("%")) == pytest.approx(100 * per_token * 1e3 / 1e9,
                                                                     rel=0.01)
    assert training.compute_cells({}, 1000.0) == "- | - | -"


def test_d2l_comparison_alternates_and_keeps_each_sides_best(
    fake_recipe: tuple[Path, Path], tiny_corpus_zip: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script, calls = fake_recipe
    # per model: one thread twice, then default threads twice
    ours = iter([300.0, 400.0, 500.0, 450.0, 80.0, 60.0, 90.0, 70.0])

    def fake_measure(config: Path, overrides: list[str], **kw: Any) -> dict[str, Any]:
        with calls.open("a") as f:
            f.write(json.dumps(["ours", config.name, overrides]) + "\n")
        return {"tokens_per_sec": next(ours), "threads": 2 if "train.threads=0" in overrides else 1,
                "peak_rss_mb": 123.0}

    monkeypatch.setattr(training, "measure_train", fake_measure)
    result = training.d2l_comparison(7, 2, zip_path=tiny_corpus_zip, baseline=script,
                                  log=lambda s: None)
    gru, transformer = result["rows"]
    assert gru["ours_best"] == 400 and gru["recipe_1_thread"] == [100, 100]
    assert gru["ours_default_best"] == 500 and gru["recipe_as_shipped"] == [50, 50]
    assert gru["ours_threads"] == 1 and gru["ours_default_thread_count"] == 2
    assert gru["ratio_vs_recipe_1_thread"] == 4.0 and gru["ratio_vs_recipe_as_shipped"] == 10.0
    assert transformer["ratio_vs_recipe_1_thread"] == 0.8
    assert transformer["ratio_vs_recipe_as_shipped"] == 1.8
    one = ["ours", "d2l-gru.toml", ["train.epochs=7"]]
    default = ["ours", "d2l-gru.toml", ["train.epochs=7", "train.threads=0"]]
    recipe_one, shipped = ["recipe", "gru", "7", "1"], ["recipe", "gru", "7", None]
    assert _calls(calls)[:8] == [one, recipe_one, one, recipe_one,
                                 default, shipped, default, shipped]
    table = driver.markdown({"machine": driver.machine(), "command": "c", "load_start": [1.0],
                            "load_end": [2.0], "seconds": 3.0, "d2l": result})
    assert "| gru | 400 | 100 | 4.0x | 500 | 50 | 10.0x | 123 / " in table
    # the recipe's peak memory is its own child's (a Python process: tens of MB at least)
    assert gru["ours_peak_rss_mb"] == 123 and 5 < gru["recipe_peak_rss_mb"] < 1000


def test_a_stopped_recipe_run_still_bounds_its_speed(
    fake_recipe: tuple[Path, Path], tiny_corpus_zip: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCH_SHIPPED_HANGS", "1")
    monkeypatch.setattr(training, "measure_train",
                        lambda *a, **kw: {"tokens_per_sec": 1000.0, "threads": 1})
    result = training.d2l_comparison(3, 1, zip_path=tiny_corpus_zip, baseline=fake_recipe[0],
                                  shipped_timeout=0.5, log=lambda s: None)
    for row in result["rows"]:
        stopped = row["recipe_as_shipped_stopped_s"]
        assert 0.5 <= stopped < 30 and "recipe_as_shipped" not in row
        # the one-thread run trained 100 tokens/s * 2 s = 200 tokens in all
        assert row["recipe_as_shipped_below"] == round(200 / stopped)
        assert row["ratio_vs_recipe_as_shipped_above"] == round(1000 / (200 / stopped), 2)
    table = driver.markdown({"machine": driver.machine(), "command": "c", "load_start": [1.0],
                            "load_end": [2.0], "seconds": 3.0, "d2l": result})
    assert f"(stopped after {stopped:.0f} s) | > " in table


def test_d2l_comparison_without_the_corpus_zip_measures_ours_and_says_why(
    fake_recipe: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(training, "measure_train",
                        lambda *a, **kw: {"tokens_per_sec": 10.0, "threads": 1})
    result = training.d2l_comparison(3, 1, zip_path=None, baseline=fake_recipe[0],
                                  log=lambda s: None)
    assert result["baseline"] is None
    assert any("recipe skipped" in n and "NMT_DATA_MIRROR" in n for n in result["notes"])
    assert all("ratio_vs_recipe_1_thread" not in r for r in result["rows"])
    assert not fake_recipe[1].exists()  # the recipe never ran


def test_bench_main_writes_json_and_markdown(
    tiny_data_dir: Path, fake_recipe: tuple[Path, Path], tmp_path: Path,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the training child is tested above; here it is stood in for, to keep the suite fast
    monkeypatch.setattr(training, "measure_train",
                        lambda config, *a, **kw: {"tokens_per_sec": 250.0, "threads": 1})
    out = tmp_path / "out"
    driver.main(["--out", str(out), "--only", "d2l", "--d2l-epochs", "1", "--repeats", "1",
                "--baseline", str(fake_recipe[0])])
    result = json.loads((out / "bench.json").read_text())
    rows = {r["model"]: r for r in result["d2l"]["rows"]}
    assert set(rows) == {"gru", "transformer"}
    for r in rows.values():
        assert r["ours_best"] == 250 and r["ratio_vs_recipe_1_thread"] == 2.5
        assert r["recipe_as_shipped"] == [50] and r["ratio_vs_recipe_as_shipped"] == 5.0
    assert result["load_start"] and result["load_end"] and result["machine"]["cores"]
    md = (out / "bench.md").read_text()
    assert md.strip() in capsys.readouterr().out
    assert "| gru | 250 | 100 | 2.5x | 250 | 50 | 5.0x |" in md


def test_bad_options_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        driver.main(["--only", "d2l,gpu"])
    assert e.value.code == 1
    assert capsys.readouterr().err.strip() == (
        "error: --only d2l,gpu: expected some of data, d2l, train, decode, export")


def test_bench_runs_from_any_directory_with_the_corpus_as_an_option(
    tiny_data_dir: Path, tiny_corpus_zip: Path, fake_recipe: tuple[Path, Path], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """configs/ resolve against the repository, not the working directory; --corpus names the
    recipe's input (here the folder holding fra-eng.zip) where NMT_DATA_MIRROR is not set."""
    measured: list[Path] = []

    def fake_measure(config: Path, *a: Any, **kw: Any) -> dict[str, Any]:
        measured.append(config)
        return {"tokens_per_sec": 250.0, "threads": 1}

    monkeypatch.setattr(training, "measure_train", fake_measure)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NMT_DATA_MIRROR")
    driver.main(["--out", "out", "--only", "d2l", "--d2l-epochs", "1", "--repeats", "1",
                 "--baseline", str(fake_recipe[0]), "--corpus", str(tiny_corpus_zip.parent)])
    result = json.loads((tmp_path / "out" / "bench.json").read_text())
    assert all(r["ratio_vs_recipe_1_thread"] == 2.5 for r in result["d2l"]["rows"])
    assert [c.name for c in measured] == ["d2l-gru.toml"] * 2 + ["d2l-transformer.toml"] * 2
    assert all(c.is_file() and c.parent.parent == Path(driver.__file__).parent.parent
               for c in measured)


def test_without_a_baseline_ours_is_measured_alone_and_one_line_says_so(
    tiny_data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(training, "measure_train",
                        lambda *a, **kw: {"tokens_per_sec": 250.0, "threads": 1})
    driver.main(["--out", str(tmp_path / "out"), "--only", "d2l", "--d2l-epochs", "1",
                 "--repeats", "1"])
    said = [line for line in capsys.readouterr().out.splitlines() if "recipe skipped" in line]
    assert said[0] == "  recipe skipped: no --baseline (the recipe script, d2l_recipe.py); " \
                      "ours is measured alone"
    result = json.loads((tmp_path / "out" / "bench.json").read_text())
    assert result["d2l"]["baseline"] is None
    assert [r["ours_best"] for r in result["d2l"]["rows"]] == [250, 250]
    assert all("ratio_vs_recipe_1_thread" not in r for r in result["d2l"]["rows"])


@pytest.mark.parametrize("option", ["--baseline", "--corpus"])
def test_a_missing_file_named_on_the_command_line_is_a_one_line_error(
    option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        driver.main([option, str(tmp_path / "nope"), "--out", str(tmp_path / "out")])
    assert e.value.code == 1
    assert capsys.readouterr().err.strip() == f"error: {option} {tmp_path / 'nope'}: not found"
    assert not (tmp_path / "out").exists()  # refused before anything ran


def test_the_corpus_is_the_zip_or_a_folder_holding_it(tiny_corpus_zip: Path,
                                                      tmp_path: Path) -> None:
    assert training.find_corpus_zip(tiny_corpus_zip) == tiny_corpus_zip
    assert training.find_corpus_zip(tiny_corpus_zip.parent) == tiny_corpus_zip
    assert training.find_corpus_zip(tmp_path) is None  # a folder without one
    assert training.find_corpus_zip("https://example.org/fra-eng.zip") is None
    assert training.find_corpus_zip(None) is None
