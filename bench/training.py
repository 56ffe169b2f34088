"""Training speed on the CPU: the d2l presets against the textbook recipe, and the full-corpus
configs for a fixed number of steps.

Every figure comes from a child process (``python -m bench.training CONFIG``) running the real
:func:`nmt.training.loop.train` loop, so each has its own peak resident memory and no run warms the
caches of the next. The recipe script (``--baseline``, d2l_recipe.py) runs in the same
invocation, alternating with ours, so the ratios compare like with like on whatever machine and
load the run meets.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import CONFIGS
from bench.processes import child_env, run_child
from nmt.errors import NmtError

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


# --- the training child -----------------------------------------------------------------------


def train_child(config: Path, overrides: list[str], stop_after: int, warmup: int,
                data_dir: Path | None) -> dict[str, Any]:
    """Inside the child: train ``config`` into a temporary run directory and time every step.

    ``stop_after`` > 0 ends the loop after that step the way Ctrl-C does, so the end-of-run
    validation pass (minutes for the large configs) stays out of the figures.
    """
    import torch

    import nmt.training.loop as training
    from nmt.config import load_config
    from nmt.data.download import default_data_dir
    from nmt.runs.directory import validation_records

    class StopAfter(training.StopFlag):
        def check(self, step: int) -> bool:
            return self.requested or (stop_after > 0 and step >= stop_after)

    step_times: list[tuple[float, int]] = []  # (seconds, target tokens) per optimizer step
    inner = getattr(training, "train_step", None)
    if inner is not None:
        def timed_step(*args: Any, **kwargs: Any) -> tuple[float, float, int]:
            start = time.perf_counter()
            objective, loss, tokens = inner(*args, **kwargs)
            step_times.append((time.perf_counter() - start, tokens))
            return objective, loss, tokens

        training.train_step = timed_step
    cfg = load_config(config, overrides)
    with tempfile.TemporaryDirectory(prefix="nmt-bench-") as tmp:
        result = training.train(cfg, Path(tmp) / "run", data_dir=data_dir or default_data_dir(),
                                log=lambda s: None, stop=StopAfter())
        validations = validation_records(Path(tmp) / "run")
    from nmt.training.cost import this_cpu_fp32_peak

    steady = step_times[warmup:]
    steady_seconds = sum(s for s, _ in steady)
    peak = this_cpu_fp32_peak(torch.get_num_threads()) if result.device == "cpu" else None
    return {
        "tokens_per_sec": result.tokens_per_sec, "train_loss": result.train_loss,
        "steps": result.progress.step, "tokens": result.progress.tokens,
        "steady_tokens_per_sec": (sum(n for _, n in steady) / steady_seconds
                                  if steady_seconds > 0 else None),
        "step_seconds": [round(s, 3) for s, _ in step_times], "warmup_steps": warmup,
        "device": result.device, "threads": torch.get_num_threads(),
        "flops_per_token": result.flops_per_token,
        "cpu_peak_flops": peak.flops if peak else None,
        "cpu_peak": peak.describe() if peak else None,
        # each validation's loss, with the seconds the training steps before it took
        "valid": [{"step": r["step"], "valid_loss": r["valid_loss"],
                   "train_s": round(sum(s for s, _ in step_times[:r["step"]]), 2)}
                  for r in validations if r.get("valid_loss") is not None],
    }


def measure_train(config: Path, overrides: Sequence[str] = (), *, stop_after: int = 0,
                  warmup: int = 0, data_dir: Path | None = None,
                  prefix: Sequence[str] = (), threads: int | None = None) -> dict[str, Any]:
    """Run :func:`train_child` in a fresh process (``threads``: its OpenMP threads, None for
    torch's default); its figures plus wall seconds and peak RSS.
    ``prefix`` goes before the command (``taskset -c 0``, say)."""
    # the child runs in the repository root: paths are made absolute
    cmd = [*prefix, sys.executable, "-m", "bench.training", str(config.resolve()),
           "--stop-after", str(stop_after), "--warmup", str(warmup)]
    if data_dir is not None:
        cmd += ["--data-dir", str(data_dir.resolve())]
    for text in overrides:
        cmd += ["--set", text]
    child = run_child(cmd, env=child_env(threads))
    row = child.last_json(f"training {config.name}")
    row.update(config=config.name, overrides=list(overrides), wall_s=round(child.seconds, 1),
               peak_rss_mb=round(child.peak_rss_mb))
    return row


# --- the benchmarks ---------------------------------------------------------------------------


def find_corpus_zip(place: str | Path | None) -> Path | None:
    """The recipe's input: ``place`` when it is a zip, ``place/fra-eng.zip`` when it is a folder
    holding one; None when there is none (or ``place`` is a URL)."""
    if not place:
        return None
    path = Path(place).expanduser()
    if path.is_dir():
        path = path / "fra-eng.zip"
    return path if path.is_file() and path.suffix == ".zip" else None


def d2l_comparison(epochs: int, repeats: int, *, zip_path: Path | None,
                   baseline: Path | None, data_dir: Path | None = None,
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
    recipe = (baseline, zip_path) if baseline is not None and zip_path is not None else None
    have_baseline = recipe is not None
    if not have_baseline:
        missing = ("no --baseline (the recipe script, d2l_recipe.py)" if baseline is None
                   else "no fra-eng.zip (give --corpus, the zip or its folder, or set "
                   "NMT_DATA_MIRROR)")
        notes.append(f"recipe skipped: {missing}")
        log(f"  recipe skipped: {missing}; ours is measured alone")
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
                if recipe is not None and not stopped_before:  # a stopped run is not tried again
                    sides[recipe_key].append(_baseline(*recipe, model, epochs, recipe_threads,
                                                       timeout, log))
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


def _baseline(script: Path, zip_path: Path, model: str, epochs: int,
              threads: int | None, timeout: float | None,
              log: Callable[[str], None]) -> dict[str, float]:
    """One run of the recipe script: its tokens/s and seconds, or when it was stopped."""
    child = run_child([sys.executable, str(script), str(zip_path), model, str(epochs)],
                      env=child_env(threads), timeout=timeout or 3600.0)
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


# --- the report -------------------------------------------------------------------------------


def _mb(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def d2l_markdown(d: dict[str, Any], default_threads: int) -> str:
    """:func:`d2l_comparison`'s result as a Markdown paragraph and table; ``default_threads``:
    torch's default thread count on the machine (the recipe as shipped uses it)."""
    out = ["; ".join(d["notes"]) + f"; best of {d['repeats']} alternating runs per side, "
           "first both on one thread, then both at torch's default thread count (ours "
           "with `train.threads=0`, the recipe as shipped, stopped after "
           f"{d['shipped_timeout_s']:.0f} s).", "",
           "| model | ours, 1 thread | recipe, 1 thread | ours / recipe | ours, "
           f"{default_threads} threads | recipe as shipped "
           f"({default_threads} threads) | ours / shipped "
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
    return "\n".join(out)


def full_corpus_markdown(rows: list[dict[str, Any]]) -> str:
    """:func:`full_corpus_training`'s rows as a Markdown table and how to read it."""
    out = ["| config | steps | target tokens/step | tokens/s, whole run | tokens/s, steady "
           "| s/step | MFLOP/token | GFLOP/s, steady | % of fp32 peak | peak RSS MB "
           "| threads |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        steady = r["steady_tokens_per_sec"]
        per_step = statistics.median(r["step_seconds"][r["warmup_steps"]:] or [0.0])
        name = r["config"] + "".join(f", {c.split('.', 1)[-1]}" for c in r.get("changed", []))
        out.append(f"| {name} | {r['steps']} | {r['tokens'] / max(r['steps'], 1):,.0f}"
                   f" | {r['tokens_per_sec']:,.0f} | {f'{steady:,.0f}' if steady else '-'} "
                   f"| {per_step:.2f} | {compute_cells(r, steady)} | {r['peak_rss_mb']:,} "
                   f"| {r['threads']} |")
    left_out = ", ".join(f"{r['config']} {r['warmup_steps']}" for r in rows)
    peaks = sorted({r["cpu_peak"] for r in rows if r.get("cpu_peak")})
    out += ["", f"Steady: per-step times, leaving out the first steps ({left_out}); whole "
            "run: what `nmt train` prints (first step to saved checkpoint, so it includes "
            "batching and the checkpoint write). s/step: median of the steady steps. "
            "MFLOP/token: training FLOPs per target token at the training split's mean "
            "lengths (nmt/training/cost.py: matrix products, backward 2x the forward); GFLOP/s: "
            "that "
            "times the steady tokens/s; % of fp32 peak: of this CPU's at the threads used ("
            + ("; ".join(peaks) if peaks else "not known for this CPU") + "). "
            f"Every run: --set {' '.join(CPU_OVERRIDES)} train.max_steps=STEPS."]
    return "\n".join(out)


def compute_cells(row: dict[str, Any], tokens_per_sec: float | None) -> str:
    """Three table cells: MFLOP per target token, the GFLOP/s ``tokens_per_sec`` makes and
    their share of the CPU's fp32 peak (``-`` for what a row does not know)."""
    from nmt.training.cost import significant

    per_token, peak = row.get("flops_per_token"), row.get("cpu_peak_flops")
    if not per_token:
        return "- | - | -"
    if not tokens_per_sec:
        return f"{per_token / 1e6:.2f} | - | -"
    achieved = tokens_per_sec * per_token
    share = f"{significant(100 * achieved / peak)}%" if peak else "-"
    return f"{per_token / 1e6:.2f} | {significant(achieved / 1e9)} | {share}"


def main(argv: list[str] | None = None) -> None:
    """The training child :func:`measure_train` starts: prints one JSON line of figures."""
    p = argparse.ArgumentParser(prog="python -m bench.training",
                                description="Train CONFIG in a temporary run directory, timing "
                                "every step; print the figures as one JSON line.")
    p.add_argument("config", type=Path)
    p.add_argument("--set", action="append", default=[], help="section.key=value")
    p.add_argument("--stop-after", type=int, default=0, help="end after this step (0: never)")
    p.add_argument("--warmup", type=int, default=0, help="leading steps left out of 'steady'")
    p.add_argument("--data-dir", type=Path, default=None)
    args = p.parse_args(argv)
    try:
        row = train_child(args.config, args.set, args.stop_after, args.warmup, args.data_dir)
    except NmtError as e:  # the parent reports the last line of stderr
        print(f"error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
    print(json.dumps(row))


if __name__ == "__main__":
    main()
