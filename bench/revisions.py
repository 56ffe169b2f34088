"""Speed of two revisions of nmt, measured in one invocation, alternating.

    python -m bench.revisions --before REV [--after REV] [--rounds 3] [--out bench/out]

Each side is a detached ``git worktree`` of its revision (removed at the end); every
measurement is a fresh process (``bench/revision_probe.py``) importing that side's ``nmt``,
and the sides alternate (before, after, after, before, ...), so a machine that slows down or
speeds up part-way hurts both alike. Both sides read the same configs (this checkout's), the same
prepared data and the same trained run, so only the code differs.

Workloads (``--workloads``, comma-separated):

- ``demo``: ``configs/demo.toml`` training on the CPU (its 2 threads), no validation;
- ``d2l``: the two textbook presets, ``configs/d2l-{gru,transformer}.toml``;
- ``full``: ``configs/gru.toml`` and ``configs/transformer.toml`` (GPU configs), a few steps on
  the CPU;
- ``decode``: greedy decoding of the test split with ``--run`` (default ``runs/demo``), and
  beam 5 on its first 500 sources; equal output digests mean the same translations.

Training speed is target tokens per second at the median step time, leaving out the first
steps (warm-up); the two sides train on the same batches, so their ratio is the ratio of
median step times. Prints a Markdown table and writes ``revisions.json`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import ROOT
from bench.processes import child_env, run_child
from nmt.errors import NmtError

# Run as a script, not with -m: its own folder goes first on sys.path, so the `nmt` it imports
# is the one PYTHONPATH names, never this checkout's.
PROBE = ROOT / "bench" / "revision_probe.py"

# name: [(config, steps measured, steps left out at the start, overrides)]
TRAIN_WORKLOADS: dict[str, list[tuple[str, int, int, list[str]]]] = {
    "demo": [("configs/demo.toml", 40, 5, [])],
    "d2l": [("configs/d2l-gru.toml", 300, 30, []), ("configs/d2l-transformer.toml", 300, 30, [])],
    # the GPU configs, a few steps on the CPU (transformer.toml at a quarter of its batch: its
    # own 16,000 tokens need over 12 GB here)
    "full": [("configs/gru.toml", 4, 1, ["train.device=cpu", "train.precision=fp32"]),
             ("configs/transformer.toml", 4, 1, ["train.device=cpu", "train.precision=fp32",
                                                 "train.batch_size=4000"])],
}


def git(*args: str) -> str:
    done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["no error output"])[0]
        raise SystemExit(f"error: git {args[0]}: {reason}")
    return done.stdout.strip()


def probe(tree: Path, spec: dict[str, Any]) -> dict[str, Any]:
    """One measurement in a fresh process that imports the ``nmt`` of ``tree``."""
    env = dict(child_env(), PYTHONPATH=str(tree), NMT_NO_PROGRESS="1")
    child = run_child([sys.executable, str(PROBE), json.dumps(spec)], env=env)
    return child.last_json(f"{tree.name} ({spec['workload']})")


def specs(workloads: list[str], data_dir: Path, run: Path) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for name in workloads:
        if name == "decode":
            if not (run / "checkpoints" / "best.pt").is_file():
                print(f"decode: {run}/checkpoints/best.pt not found; skipped (train one with "
                      "`make demo`)")
                continue
            base = {"workload": "decode", "run": str(run), "data_dir": str(data_dir)}
            out.append(("decode greedy, test split", {**base, "beam": 1, "sentences": 0}))
            out.append(("decode beam 5, 500 test sources", {**base, "beam": 5,
                                                            "sentences": 500}))
            continue
        for config, steps, skip, overrides in TRAIN_WORKLOADS[name]:
            out.append((f"train {Path(config).stem}", {
                "workload": "train", "config": str(ROOT / config), "steps": steps + skip,
                "skip": skip, "set": overrides, "data_dir": str(data_dir)}))
    return out


def summary(spec: dict[str, Any], results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per side: the median over rounds of each round's figure."""
    if spec["workload"] == "train":
        figures = []
        for r in results:
            steady = r["step_seconds"][spec["skip"]:]
            figures.append(r["tokens"] / r["steps"] / statistics.median(steady))
        return {"tokens_per_s": statistics.median(figures), "rounds": figures}
    figures = [r["sentences"] / r["seconds"] for r in results]
    return {"sentences_per_s": statistics.median(figures), "rounds": figures,
            "digests": sorted({r["digest"] for r in results})}


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.revisions",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="git revision compared against")
    ap.add_argument("--after", default="HEAD", help="git revision compared with it")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workloads", default="demo,decode,d2l")
    ap.add_argument("--data-dir", type=Path, default=ROOT / "data",
                    help="corpus and prepared cache (nmt data download fills it)")
    ap.add_argument("--run", type=Path, default=ROOT / "runs" / "demo")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    args = ap.parse_args()
    revisions = {"before": git("rev-parse", "--short", args.before),
                 "after": git("rev-parse", "--short", args.after)}
    jobs = specs(args.workloads.split(","), args.data_dir.resolve(), args.run.resolve())
    results: dict[str, dict[str, list[dict[str, Any]]]] = {
        label: {"before": [], "after": []} for label, _ in jobs}
    with tempfile.TemporaryDirectory() as tmp:
        trees = {side: Path(tmp) / side for side in revisions}
        for side, rev in revisions.items():
            git("worktree", "add", "--detach", str(trees[side]), rev)
        try:
            started = time.strftime("%Y-%m-%d %H:%M")
            load = os.getloadavg()[0]
            for label, spec in jobs:
                for round_ in range(args.rounds):
                    # before, after; after, before; ...: neither side always runs first
                    for side in ("before", "after")[:: 1 if round_ % 2 == 0 else -1]:
                        results[label][side].append(probe(trees[side], spec))
                    print(f"{label}: round {round_ + 1} of {args.rounds} done", file=sys.stderr)
        except NmtError as e:
            raise SystemExit(f"error: {e}") from None
        finally:
            for tree in trees.values():
                git("worktree", "remove", "--force", str(tree))
    report = {"revisions": revisions, "started": started, "load_at_start": load,
              "load_at_end": os.getloadavg()[0], "machine": platform.processor()
              or platform.machine(), "rounds": args.rounds, "workloads": {}}
    print(f"\nbefore {revisions['before']}, after {revisions['after']}; {args.rounds} rounds "
          f"alternating; load {load:.1f} at the start, {report['load_at_end']:.1f} at the end\n")
    print("| workload | before | after | after / before |\n|---|---:|---:|---:|")
    for label, spec in jobs:
        sides = {side: summary(spec, results[label][side]) for side in ("before", "after")}
        report["workloads"][label] = sides
        key = "tokens_per_s" if spec["workload"] == "train" else "sentences_per_s"
        unit = "tokens/s" if key == "tokens_per_s" else "sentences/s"
        b, a = sides["before"][key], sides["after"][key]
        same = ""
        if spec["workload"] == "decode":
            same = (" (same output)" if sides["before"]["digests"] == sides["after"]["digests"]
                    else " (outputs differ)")
        print(f"| {label} | {b:,.0f} {unit} | {a:,.0f} {unit} | {a / b:.3f}x{same} |")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "revisions.json").write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
