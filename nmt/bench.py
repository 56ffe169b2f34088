"""CPU benchmarks behind ``make bench``: training speed against the textbook recipe, training
speed and peak memory of the full-corpus configs, decoding, and data preparation.

``python -m nmt.bench --out bench/out`` prints Markdown tables and writes ``bench.json`` and
``bench.md``. Every training figure comes from a child process running the real
:func:`nmt.train.train` loop, so each has its own peak resident memory (VmHWM) and no run warms
the caches of the next. The recipe script
(``../shared/baselines/d2l_recipe.py``) runs in the same invocation, alternating with ours, so the
ratios compare like with like on whatever machine and load the run meets; the load average at
the start and the end is recorded because a shared machine changes every absolute figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nmt.errors import NmtError

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
BASELINE = ROOT.parent / "shared" / "baselines" / "d2l_recipe.py"
D2L_MODELS = ("gru", "transformer")  # d2l_recipe.py's names; our presets are configs/d2l-NAME


@dataclass(frozen=True)
class FullRun:
    """A full-corpus config measured for ``steps`` optimizer steps on the CPU."""

    name: str  # configs/NAME.toml
    steps: int
    warmup: int  # leading steps left out of the steady figure (allocation, first-call costs)
    overrides: tuple[str, ...] = ()


# The GPU-sized configs take tens of seconds to minutes per step on two cores, hence so few
# steps. transformer.toml's own batch (16,000 tokens) passed 12 GB of RSS before finishing one
# step on the CPU, more than a shared machine can spare, so it is measured at a quarter of it.
FULL_CONFIGS = (FullRun("demo", 20, 2), FullRun("gru", 2, 1),
                FullRun("transformer", 2, 1, ("train.batch_size=4000",)))
# What makes a full-corpus config a fixed-length CPU measurement (train.max_steps is added).
CPU_OVERRIDES = ("train.device=cpu", "train.precision=fp32", "train.eval_sentences=-1",
                 "train.eval_every=1000000", "train.max_minutes=0")


# --- child processes --------------------------------------------------------------------------


@dataclass
class ChildRun:
    """One finished child process: exit status, wall seconds, peak RSS and its output."""

    returncode: int
    seconds: float
    peak_rss_mb: float
    stdout: str
    stderr: str

    def last_json(self, what: str) -> dict[str, Any]:
        """The last stdout line that is a JSON object (both our child and the recipe print one)."""
        if self.returncode != 0:
            tail = (self.stderr.strip().splitlines() or ["no error output"])[-1]
            raise NmtError(f"{what}: exited with status {self.returncode}: {tail[:300]}")
        for line in reversed(self.stdout.splitlines()):
            if line.startswith("{"):
                return dict(json.loads(line))
        raise NmtError(f"{what}: printed no JSON result line")


def run_child(cmd: Sequence[str], *, env: dict[str, str] | None = None,
              timeout: float = 1800.0, poll: float = 0.02) -> ChildRun:
    """Run ``cmd`` to completion and measure its wall time and peak resident memory.

    The peak is the child's VmHWM, read from /proc every ``poll`` seconds until it exits (a
    high-water mark, so only growth in the last poll interval can be missed). ``ru_maxrss`` from
    ``wait4`` is the fallback where /proc is missing, but on Linux it also counts the parent's
    memory at the fork, so a small child would report at least this process's size.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=err, env=env, cwd=ROOT)
        hwm_kb = 0
        try:
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                hwm_kb = max(hwm_kb, _vm_hwm_kb(proc.pid))
                if time.perf_counter() - start > timeout:
                    proc.kill()
                time.sleep(poll)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        # ru_maxrss is in KiB on Linux, in bytes on macOS
        rss_kb = hwm_kb or usage.ru_maxrss / (1024 if sys.platform == "darwin" else 1)
        return ChildRun(proc.returncode, seconds, rss_kb / 1024,
                        out.read().decode("utf-8", "replace"),
                        err.read().decode("utf-8", "replace"))


def _vm_hwm_kb(pid: int) -> int:
    """Peak resident memory of a running process in KiB (0 when /proc cannot say)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _child_env(threads: int | None = None) -> dict[str, str]:
    """The environment for a child: threads=None leaves torch's default thread count."""
    env = dict(os.environ)
    for key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.pop(key, None)
        if threads is not None:
            env[key] = str(threads)
    return env


def train_child(config: Path, overrides: list[str], stop_after: int, warmup: int,
                data_dir: Path | None) -> dict[str, Any]:
    """Inside the child: train ``config`` into a temporary run directory and time every step.

    ``stop_after`` > 0 ends the loop after that step the way Ctrl-C does, so the end-of-run
    validation pass (minutes for the large configs) stays out of the figures.
    """
    import torch

    import nmt.train as training
    from nmt.config import load_config
    from nmt.data.download import default_data_dir

    class StopAfter(training.StopFlag):
        def check(self, step: int) -> bool:
            return self.requested or (stop_after > 0 and step >= stop_after)

    step_times: list[tuple[float, int]] = []  # (seconds, target tokens) per optimizer step
    inner = getattr(training, "_train_step", None)
    if inner is not None:
        def timed_step(*args: Any, **kwargs: Any) -> tuple[float, float, int]:
            start = time.perf_counter()
            objective, loss, tokens = inner(*args, **kwargs)
            step_times.append((time.perf_counter() - start, tokens))
            return objective, loss, tokens

        training._train_step = timed_step  # type: ignore[attr-defined]
    cfg = load_config(config, overrides)
    with tempfile.TemporaryDirectory(prefix="nmt-bench-") as tmp:
        result = training.train(cfg, Path(tmp) / "run", data_dir=data_dir or default_data_dir(),
                                log=lambda s: None, progress_bar=False, stop=StopAfter())
    steady = step_times[warmup:]
    steady_seconds = sum(s for s, _ in steady)
    return {
        "tokens_per_sec": result.tokens_per_sec, "train_loss": result.train_loss,
        "steps": result.progress.step, "tokens": result.progress.tokens,
        "steady_tokens_per_sec": (sum(n for _, n in steady) / steady_seconds
                                  if steady_seconds > 0 else None),
        "step_seconds": [round(s, 3) for s, _ in step_times], "warmup_steps": warmup,
        "device": result.device, "threads": torch.get_num_threads(),
    }


def measure_train(config: Path, overrides: Sequence[str] = (), *, stop_after: int = 0,
                  warmup: int = 0, data_dir: Path | None = None) -> dict[str, Any]:
    """Run :func:`train_child` in a fresh process; its figures plus wall seconds and peak RSS."""
    cmd = [sys.executable, "-m", "nmt.bench", "--child-train", str(config),
           "--stop-after", str(stop_after), "--warmup", str(warmup)]
    if data_dir is not None:
        cmd += ["--data-dir", str(data_dir)]
    for text in overrides:
        cmd += ["--set", text]
    child = run_child(cmd, env=_child_env())
    row = child.last_json(f"training {config.name}")
    row.update(config=config.name, overrides=list(overrides), wall_s=round(child.seconds, 1),
               peak_rss_mb=round(child.peak_rss_mb))
    return row


# --- the benchmarks ---------------------------------------------------------------------------


def find_corpus_zip() -> Path | None:
    """``$NMT_DATA_MIRROR`` (a zip or a folder holding fra-eng.zip), else ../shared/data."""
    for place in (os.environ.get("NMT_DATA_MIRROR"), str(ROOT.parent / "shared" / "data")):
        if not place:
            continue
        p = Path(place)
        if p.is_dir():
            p = p / "fra-eng.zip"
        if p.is_file() and p.suffix == ".zip":
            return p
    return None


def d2l_comparison(epochs: int, repeats: int, *, zip_path: Path | None,
                   baseline: Path = BASELINE, data_dir: Path | None = None,
                   shipped_timeout: float = 120.0,
                   log: Callable[[str], None] = print) -> dict[str, Any]:
    """Tokens/s of configs/d2l-{gru,transformer}.toml against d2l_recipe.py, same epochs.

    Two comparisons, each alternating ours and the recipe ``repeats`` times and keeping each
    side's best run (the least disturbed by other processes): both on one thread (what our
    presets use; the steadiest figures), then both at torch's default thread count (ours with
    ``train.threads=0``, the recipe as shipped). A default-threads recipe run stops after
    ``shipped_timeout`` seconds: on a busy machine its threads can wait on each other for
    minutes, and a stopped run still bounds its speed (the one-thread run says how many tokens
    it has).
    """
    notes = [f"{epochs} epochs each side (the recipe trains 250 GRU / 200 Transformer epochs)"]
    have_baseline = zip_path is not None and baseline.is_file()
    if not have_baseline:
        notes.append(f"recipe skipped: {baseline if zip_path else 'fra-eng.zip'} not found "
                     "(set NMT_DATA_MIRROR to the zip or its folder)")
    rows = []
    for model in D2L_MODELS:
        config = CONFIGS / f"d2l-{model}.toml"
        sides: dict[str, list[Any]] = {"ours": [], "one": [], "ours_default": [], "shipped": []}
        threads = {}
        ours_rss: list[float] = []  # peak RSS of our one-thread runs, MB
        for ours_key, recipe_key, extra, recipe_threads, timeout in (
                ("ours", "one", [], 1, None),
                ("ours_default", "shipped", ["train.threads=0"], None, shipped_timeout)):
            for _ in range(repeats):
                run = measure_train(config, [f"train.epochs={epochs}", *extra], data_dir=data_dir)
                sides[ours_key].append(run["tokens_per_sec"])
                threads[ours_key] = run["threads"]
                if ours_key == "ours" and "peak_rss_mb" in run:
                    ours_rss.append(run["peak_rss_mb"])
                log(f"  ours {model}: {run['tokens_per_sec']:,.0f} tokens/s, "
                    f"{run['threads']} thread(s)")
                stopped_before = any("stopped_s" in r for r in sides[recipe_key])
                if have_baseline and not stopped_before:  # a stopped run is not tried again
                    sides[recipe_key].append(_baseline(baseline, zip_path, model, epochs,
                                                       recipe_threads, timeout, log))
        best, best_default = max(sides["ours"]), max(sides["ours_default"])
        row: dict[str, Any] = {
            "model": model, "epochs": epochs, "ours_tokens_per_sec": sides["ours"],
            "ours_best": round(best), "ours_threads": threads["ours"],
            "ours_default_threads": sides["ours_default"],
            "ours_default_best": round(best_default),
            "ours_default_thread_count": threads["ours_default"],
            "ours_peak_rss_mb": round(max(ours_rss)) if ours_rss else None}
        if have_baseline:
            fastest = max(sides["one"], key=lambda r: r["tokens_per_sec"])
            row["recipe_1_thread"] = [round(r["tokens_per_sec"]) for r in sides["one"]]
            row["ratio_vs_recipe_1_thread"] = round(best / fastest["tokens_per_sec"], 2)
            row["recipe_peak_rss_mb"] = round(max(r["peak_rss_mb"] for r in sides["one"]))
            shipped = [r["tokens_per_sec"] for r in sides["shipped"] if "tokens_per_sec" in r]
            if shipped:
                row["recipe_as_shipped"] = [round(x) for x in shipped]
                row["ratio_vs_recipe_as_shipped"] = round(best_default / max(shipped), 2)
            else:  # no run trained every token in the time it had
                stopped = max(r["stopped_s"] for r in sides["shipped"])  # the tightest bound
                below = fastest["tokens_per_sec"] * fastest["seconds"] / stopped
                row.update(recipe_as_shipped_stopped_s=stopped,
                           recipe_as_shipped_below=round(below),
                           ratio_vs_recipe_as_shipped_above=round(best_default / below, 2))
        rows.append(row)
    return {"rows": rows, "repeats": repeats, "notes": notes, "shipped_timeout_s": shipped_timeout,
            "baseline": str(baseline) if have_baseline else None}


def _baseline(script: Path, zip_path: Path | None, model: str, epochs: int,
              threads: int | None, timeout: float | None,
              log: Callable[[str], None]) -> dict[str, float]:
    """One run of the recipe script: its tokens/s and seconds, or when it was stopped."""
    child = run_child([sys.executable, str(script), str(zip_path), model, str(epochs)],
                      env=_child_env(threads), timeout=timeout or 3600.0)
    label = f"recipe {model} ({threads or 'default'} thread(s))"
    if timeout is not None and child.returncode != 0 and child.seconds >= timeout:
        log(f"  {label}: stopped after {child.seconds:.0f} s")
        return {"stopped_s": round(child.seconds, 1)}
    res = child.last_json(f"{script.name} {model}")
    log(f"  {label}: {res['tokens_per_sec']:,.0f} tokens/s")
    return {"tokens_per_sec": float(res["tokens_per_sec"]), "seconds": float(res["seconds"]),
            "peak_rss_mb": child.peak_rss_mb}


def full_corpus_training(plan: Sequence[FullRun], *, data_dir: Path | None = None,
                         log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Tokens/s and peak RSS of full-corpus configs for a fixed number of steps on the CPU."""
    rows = []
    for run in plan:
        overrides = [*CPU_OVERRIDES, f"train.max_steps={run.steps}", *run.overrides]
        row = measure_train(CONFIGS / f"{run.name}.toml", overrides, stop_after=run.steps,
                            warmup=run.warmup, data_dir=data_dir)
        row["changed"] = list(run.overrides)
        log(f"  {run.name}: {row['steps']} steps, {row['tokens_per_sec']:,.0f} tokens/s "
            f"(steady {row['steady_tokens_per_sec'] or 0:,.0f}), peak RSS {row['peak_rss_mb']} MB")
        rows.append(row)
    return rows


def data_preparation(data_dir: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    """``nmt data prepare`` (default data config) into a fresh data directory, then again."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="nmt-bench-data-") as tmp:
        shutil.copytree(data_dir / "fra-eng", Path(tmp) / "fra-eng")  # no download in the timing
        for step in ("fresh cache", "cache hit"):
            child = run_child([sys.executable, "-m", "nmt", "data", "prepare",
                               "--data-dir", tmp], env=_child_env())
            if child.returncode != 0:
                raise NmtError(f"nmt data prepare ({step}): exited with status "
                               f"{child.returncode}: {child.stderr.strip()[-300:]}")
            rows.append({"step": step, "seconds": round(child.seconds, 2),
                         "peak_rss_mb": round(child.peak_rss_mb)})
            log(f"  prepare, {step}: {child.seconds:.1f} s, peak RSS {child.peak_rss_mb:.0f} MB")
    return {"config": "defaults (no --config)", "rows": rows}


# --- the report -------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    """CPU model, cores, versions, git commit and date: what each table is stamped with."""
    import torch

    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    def git(*args: str) -> str | None:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, text=True, capture_output=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    commit = git("rev-parse", "--short", "HEAD") or None
    # what is measured is the working tree: say when it is not the commit
    changed = git("status", "--porcelain", "--untracked-files=no")
    if commit and changed:
        commit += " (with uncommitted changes)"
    return {"cpu": model, "cores": os.cpu_count(), "torch_default_threads": torch.get_num_threads(),
            "torch": torch.__version__, "python": platform.python_version(),
            "commit": commit, "date": time.strftime("%Y-%m-%d %H:%M %Z")}


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _mb(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def markdown(result: dict[str, Any]) -> str:
    """The whole result as the Markdown of bench.md and docs/BENCHMARKS.md."""
    m = result["machine"]
    out = [f"Command: `{result['command']}`. Machine: {m['cpu']}, {m['cores']} cores, torch "
           f"{m['torch']}, Python {m['python']}. Date {m['date']}, commit {m['commit']}. "
           f"Load average (1/5/15 min) {result['load_start']} at the start, "
           f"{result['load_end']} at the end; {result['seconds']:.0f} s in all.", ""]
    if "d2l" in result:
        d = result["d2l"]
        out += ["### Training against the recipe (d2l presets, tokens/s)", "",
                "; ".join(d["notes"]) + f"; best of {d['repeats']} alternating runs per side, "
                "first both on one thread, then both at torch's default thread count (ours "
                "with `train.threads=0`, the recipe as shipped, stopped after "
                f"{d['shipped_timeout_s']:.0f} s).", "",
                "| model | ours, 1 thread | recipe, 1 thread | ours / recipe | ours, "
                f"{m['torch_default_threads']} threads | recipe as shipped "
                f"({m['torch_default_threads']} threads) | ours / shipped "
                "| peak RSS MB, 1 thread: ours / recipe |",
                "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for r in d["rows"]:
            one, shipped = r.get("recipe_1_thread"), r.get("recipe_as_shipped")
            if shipped:
                shipped_cells = f"{max(shipped):,} | {r['ratio_vs_recipe_as_shipped']}x"
            elif "recipe_as_shipped_below" in r:
                shipped_cells = (f"< {r['recipe_as_shipped_below']:,} (stopped after "
                                 f"{r['recipe_as_shipped_stopped_s']:.0f} s) | "
                                 f"> {r['ratio_vs_recipe_as_shipped_above']}x")
            else:
                shipped_cells = "- | -"
            out.append(f"| {r['model']} | {r['ours_best']:,} | "
                       f"{f'{max(one):,}' if one else '-'} | "
                       f"{r.get('ratio_vs_recipe_1_thread', '-')}x | "
                       f"{r['ours_default_best']:,} | {shipped_cells} | "
                       f"{_mb(r.get('ours_peak_rss_mb'))} / {_mb(r.get('recipe_peak_rss_mb'))} |")
        out.append("")
    if "train" in result:
        out += ["### Full-corpus configs on the CPU (fp32, no validation)", "",
                "| config | steps | target tokens/step | tokens/s, whole run | tokens/s, steady "
                "| s/step | peak RSS MB | threads |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for r in result["train"]:
            steady = r["steady_tokens_per_sec"]
            per_step = statistics.median(r["step_seconds"][r["warmup_steps"]:] or [0.0])
            name = r["config"] + "".join(f", {c.split('.', 1)[-1]}" for c in r.get("changed", []))
            out.append(f"| {name} | {r['steps']} | {r['tokens'] / max(r['steps'], 1):,.0f}"
                       f" | {r['tokens_per_sec']:,.0f} | {f'{steady:,.0f}' if steady else '-'} "
                       f"| {per_step:.2f} | {r['peak_rss_mb']:,} | {r['threads']} |")
        left_out = ", ".join(f"{r['config']} {r['warmup_steps']}" for r in result["train"])
        out += ["", f"Steady: per-step times, leaving out the first steps ({left_out}); whole "
                "run: what `nmt train` prints (first step to saved checkpoint, so it includes "
                "batching and the checkpoint write). s/step: median of the steady steps. "
                f"Every run: --set {' '.join(CPU_OVERRIDES)} train.max_steps=STEPS.", ""]
    if "decode" in result:
        from nmt.bench_decode import markdown as decode_markdown

        out += ["### Greedy decoding (nmt/bench_decode.py)", "", decode_markdown(result["decode"]),
                ""]
    if "export" in result:
        from nmt.bench_export import markdown as export_markdown

        out += ["### nmt against CTranslate2 exports (nmt/bench_export.py)", "",
                export_markdown(result["export"]), ""]
    if "data" in result:
        out += ["### Data preparation (`nmt data prepare`, whole corpus, default data config)", "",
                "| step | seconds | peak RSS MB |", "|---|---:|---:|"]
        out += [f"| {r['step']} | {r['seconds']} | {r['peak_rss_mb']:,} |"
                for r in result["data"]["rows"]]
        out.append("")
    return "\n".join(out)


PARTS = ("data", "d2l", "train", "decode", "export")


def run_benchmarks(out_dir: Path, *, parts: Sequence[str] = PARTS, d2l_epochs: int = 40,
                   repeats: int = 2, shipped_timeout: float = 120.0,
                   full_plan: Sequence[FullRun] = FULL_CONFIGS,
                   decode_run: Path | None = None, decode_sample: int = 100,
                   decode_threads: int = 0,
                   data_dir: Path | None = None, baseline: Path = BASELINE,
                   log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the chosen ``parts``; write ``out_dir/bench.json`` and ``bench.md``; return the dict."""
    from nmt.config import load_config
    from nmt.data.download import default_data_dir
    from nmt.data.prepare import prepare

    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise NmtError(f"--out {out_dir}: cannot create it ({e.strerror})") from None
    data_dir = data_dir or default_data_dir()
    start = time.perf_counter()
    result: dict[str, Any] = {"machine": machine(), "load_start": load_average(),
                              "command": "python -m nmt.bench " + " ".join(sys.argv[1:])}
    # Caches first, outside every timing, so no child's peak memory is SentencePiece training.
    configs = [f"d2l-{m}" for m in D2L_MODELS] if "d2l" in parts else []
    configs += [run.name for run in full_plan] if "train" in parts else []
    for name in configs:
        prepare(load_config(CONFIGS / f"{name}.toml").data, data_dir, log=lambda s: None)
    if "data" in parts:
        log("data preparation")
        prepare(load_config(None).data, data_dir, log=lambda s: None)  # the corpus is there
        result["data"] = data_preparation(data_dir, log)
    if "d2l" in parts:
        log(f"training against the recipe, {d2l_epochs} epochs")
        result["d2l"] = d2l_comparison(d2l_epochs, repeats, zip_path=find_corpus_zip(),
                                       baseline=baseline, data_dir=data_dir,
                                       shipped_timeout=shipped_timeout, log=log)
    if "train" in parts:
        log("full-corpus configs")
        result["train"] = full_corpus_training(full_plan, data_dir=data_dir, log=log)
    if "decode" in parts:
        from nmt.bench_decode import bench_decode

        log("decoding")
        result["decode"] = bench_decode(run_dir=decode_run, out_dir=out_dir,
                                        sample=decode_sample, threads=decode_threads,
                                        data_dir=data_dir, log=log)
    if "export" in parts:
        if decode_run is None:
            log("export: skipped (needs a trained run: --decode-run runs/NAME)")
        else:
            from nmt.bench_export import bench_export

            log("export to CTranslate2")
            result["export"] = bench_export(decode_run, out_dir, data_dir=data_dir, log=log)
    result["load_end"] = load_average()
    result["seconds"] = round(time.perf_counter() - start, 1)
    (out_dir / "bench.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    (out_dir / "bench.md").write_text(markdown(result) + "\n", encoding="utf-8")
    return result


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m nmt.bench",
                                description="CPU benchmarks; see docs/BENCHMARKS.md.")
    p.add_argument("--out", type=Path, default=Path("bench/out"), help="bench.json, bench.md")
    p.add_argument("--only", default=",".join(PARTS), help=f"comma-separated: {','.join(PARTS)}")
    p.add_argument("--d2l-epochs", type=int, default=40)
    p.add_argument("--repeats", type=int, default=2, help="alternating runs per side (best kept)")
    p.add_argument("--shipped-timeout", type=float, default=120.0,
                   help="seconds for the recipe as shipped (torch's default threads)")
    p.add_argument("--decode-run", type=Path, default=None,
                   help="trained run for decoding (default: a random demo-size model)")
    p.add_argument("--decode-sample", type=int, default=100,
                   help="sentences for the slow one-at-a-time decoding baselines")
    p.add_argument("--decode-threads", type=int, default=0, help="0: torch's default")
    p.add_argument("--data-dir", type=Path, default=None)
    p.add_argument("--baseline", type=Path, default=BASELINE, help="d2l_recipe.py")
    p.add_argument("--child-train", type=Path, default=None, help=argparse.SUPPRESS)
    p.add_argument("--set", action="append", default=[], help=argparse.SUPPRESS)
    p.add_argument("--stop-after", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--warmup", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    try:
        if args.child_train is not None:
            print(json.dumps(train_child(args.child_train, args.set, args.stop_after,
                                         args.warmup, args.data_dir)))
            return
        parts = [x.strip() for x in args.only.split(",") if x.strip()]
        unknown = sorted(set(parts) - set(PARTS))
        if unknown or not parts:
            raise NmtError(f"--only {args.only}: expected some of {', '.join(PARTS)}")
        if min(args.d2l_epochs, args.repeats, args.decode_sample) < 1 or args.decode_threads < 0:
            raise NmtError("--d2l-epochs, --repeats, --decode-sample: expected values >= 1; "
                           "--decode-threads: >= 0")
        result = run_benchmarks(args.out, parts=parts, d2l_epochs=args.d2l_epochs,
                                repeats=args.repeats, shipped_timeout=args.shipped_timeout,
                                decode_run=args.decode_run,
                                decode_sample=args.decode_sample,
                                decode_threads=args.decode_threads, data_dir=args.data_dir,
                                baseline=args.baseline)
    except NmtError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
    print(markdown(result))
    print(f"wrote {args.out / 'bench.json'} and {args.out / 'bench.md'}")


if __name__ == "__main__":
    main()
