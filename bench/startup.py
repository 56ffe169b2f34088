"""Cold start: seconds from launching ``nmt`` to its exit, for what a user types once.

``python -m bench.startup --run runs/NAME [--repeat 5] [--out bench/out]`` times, each as a
fresh process, alternated round by round so a busy moment hits every command alike:

- ``nmt --help``;
- one sentence through the CTranslate2 path (``nmt translate --model DIR``, DIR exported from
  the run before the timings) and the same through ``--engine ctranslate2 --run RUN``;
- one sentence through the PyTorch path (``nmt translate --run RUN``);
- and, for scale, ``python -c pass`` and ``python -c "import torch"``.

The figure is the median of ``--repeat`` runs; the aims are the ones docs/BENCHMARKS.md quotes
(CTranslate2 path <= 0.5 s, PyTorch path <= 1.5 s, ``--help`` <= 0.3 s). Writes
``startup.json`` and ``startup.md``. The file cache is warm (a first, untimed round reads every
file once): "cold" means a new interpreter, as when a user runs the command again.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import ROOT
from bench.machine import load_average, machine

AIMS = {"nmt --help": 0.3, "translate, CTranslate2 (--model DIR)": 0.5,
        "translate, CTranslate2 (--engine ctranslate2 --run)": 0.5,
        "translate, PyTorch (--run)": 1.5}


def nmt_command() -> list[str]:
    """The console script beside this interpreter (what a user runs), else ``python -m nmt``."""
    script = Path(sys.executable).with_name("nmt")
    return [str(script)] if script.exists() else [sys.executable, "-m", "nmt"]


def commands(run_dir: Path, model_dir: Path, sentence: str) -> dict[str, list[str]]:
    nmt = nmt_command()
    run = str(run_dir.resolve())
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        'python -c "import torch"': [sys.executable, "-c", "import torch"],
        "nmt --help": [*nmt, "--help"],
        "translate, CTranslate2 (--model DIR)": [*nmt, "translate", "--model", str(model_dir),
                                                 sentence],
        "translate, CTranslate2 (--engine ctranslate2 --run)": [
            *nmt, "translate", "--engine", "ctranslate2", "--run", run, sentence],
        "translate, PyTorch (--run)": [*nmt, "translate", "--device", "cpu", "--run", run,
                                       sentence],
    }


def time_once(cmd: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()}")
    return seconds, done.stdout.strip()


def bench_startup(run_dir: Path, out_dir: Path, repeat: int = 5,
                  sentence: str = "Je suis chez moi.") -> dict[str, Any]:
    """Median wall seconds of each command over ``repeat`` alternated rounds."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp) / "ct2"
        subprocess.run([*nmt_command(), "export", "--run", str(run_dir), "--output",
                        str(model_dir)], check=True, capture_output=True, cwd=ROOT)
        plan = commands(run_dir, model_dir, sentence)
        load_start = load_average()
        outputs = {name: time_once(cmd)[1] for name, cmd in plan.items()}  # untimed: warm files
        times: dict[str, list[float]] = {name: [] for name in plan}
        for _ in range(repeat):
            for name, cmd in plan.items():
                times[name].append(time_once(cmd)[0])
        load_end = load_average()
    result = {
        "machine": machine(), "command": "python -m bench.startup " + " ".join(sys.argv[1:]),
        "run": str(run_dir), "sentence": sentence, "repeat": repeat,
        "load_start": load_start, "load_end": load_end,
        "rows": [{"what": name, "median_s": round(statistics.median(ts), 3),
                  "min_s": round(min(ts), 3), "max_s": round(max(ts), 3),
                  "aim_s": AIMS.get(name), "output": outputs[name] if "translate" in name else ""}
                 for name, ts in times.items()],
    }
    (out_dir / "startup.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    (out_dir / "startup.md").write_text(markdown(result) + "\n", encoding="utf-8")
    return result


def markdown(result: dict[str, Any]) -> str:
    m = result["machine"]
    lines = [f"Command: `{result['command']}`. Machine: {m['cpu']}, {m['cores']} cores, torch "
             f"{m['torch']}, Python {m['python']}. Date {m['date']}, commit {m['commit']}. Load "
             f"average {result['load_start']} at the start, {result['load_end']} at the end. "
             f"Median of {result['repeat']} fresh processes each, alternated.", "",
             "| command | median s | min-max s | aim s | output |", "|---|---:|---:|---:|---|"]
    for r in result["rows"]:
        aim = "" if r["aim_s"] is None else (
            f"<= {r['aim_s']} ({'met' if r['median_s'] <= r['aim_s'] else 'missed'})")
        lines.append(f"| {r['what']} | {r['median_s']:.2f} | {r['min_s']:.2f}-{r['max_s']:.2f} "
                     f"| {aim} | {r['output']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__.split("\n")[0])
    p.add_argument("--run", type=Path, required=True, help="a trained Transformer run")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--sentence", default=None,
                   help="default: a short sentence in the run's source language")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    args = p.parse_args(argv)
    if not (args.run / "checkpoints").is_dir():
        raise SystemExit(f"--run {args.run}: no checkpoints/ (train it first)")
    sentence = args.sentence or default_sentence(args.run)
    print(markdown(bench_startup(args.run, args.out, args.repeat, sentence)))


def default_sentence(run_dir: Path) -> str:
    """A check sentence in the run's source language (English when it says nothing else)."""
    from nmt.config import load_config

    source = load_config(run_dir / "config.toml").data.source
    return {"fr": "Je suis chez moi."}.get(source, "I'm home.")


if __name__ == "__main__":
    main()
