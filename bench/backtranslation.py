"""What back-translation gains on the shipped corpus (``make bench-bt``).

``python -m bench.backtranslation --corpus ../shared/data/fra-eng.zip [--steps 600]
[--mono 40000] [--out bench/out/backtranslation]``:

1. The corpus' pairs are grouped by English sentence and shuffled (seeded): the first 2,000
   groups are the test set (``test.en``/``test.fr``, every pair a line), half of the rest is
   half A (aligned files ``a.en``/``a.fr``), and the French of the other half (at most
   ``--mono`` lines) is the monolingual text.
2. fr->en is trained on half A (``configs/demo.toml``, ``--steps`` steps), and translates the
   monolingual French with ``nmt backtranslate`` (top-10 sampling).
3. en->fr is trained on half A alone, and on half A plus the synthetic pairs as a
   ``back_translated`` source, the same steps; both are scored with ``nmt bleu`` (greedy) on
   the same test set.

Writes ``OUT/backtranslation.json`` and ``.md``; docs/BENCHMARKS.md keeps the figures.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
import zipfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import CONFIGS, ROOT
from bench.machine import machine

TEST_GROUPS = 2000


@dataclass(frozen=True)
class Halves:
    """The corpus' French references grouped by English sentence, and those sentences dealt
    (seeded) into the test set and two halves; :mod:`bench.adaptation` takes its domain from
    ``half_b`` too."""

    groups: dict[str, list[str]]
    test: list[str]
    half_a: list[str]
    half_b: list[str]


def halves(corpus_zip: Path, seed: int = 1) -> Halves:
    with zipfile.ZipFile(corpus_zip) as z:
        text = z.read("fra-eng/fra.txt").decode("utf-8")
    groups: dict[str, list[str]] = defaultdict(list)
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) >= 2 and fields[0].strip() and fields[1].strip():
            groups[fields[0]].append(fields[1])
    order = sorted(groups)
    random.Random(seed).shuffle(order)
    test, rest = order[:TEST_GROUPS], order[TEST_GROUPS:]
    return Halves(groups, test, rest[: len(rest) // 2], rest[len(rest) // 2:])


def write_aligned(work: Path, name: str, pairs: list[tuple[str, str]]) -> None:
    """``work/NAME.en`` and ``work/NAME.fr``, a pair a line."""
    (work / f"{name}.en").write_text("".join(e + "\n" for e, _ in pairs), encoding="utf-8")
    (work / f"{name}.fr").write_text("".join(f + "\n" for _, f in pairs), encoding="utf-8")


def write_results(out: Path, name: str, result: dict[str, Any], table: str) -> None:
    """``OUT/NAME.json`` and ``OUT/NAME.md``, and the table on the terminal."""
    (out / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    (out / f"{name}.md").write_text(table, encoding="utf-8")
    print(table)


def split_corpus(corpus_zip: Path, work: Path, mono: int, seed: int = 1) -> dict[str, int]:
    """Write the test set, half A and the monolingual French into ``work``; their sizes."""
    h = halves(corpus_zip, seed)
    groups, test, half_a, half_b = h.groups, h.test, h.half_a, h.half_b

    write_aligned(work, "test", [(e, f) for e in test for f in groups[e]])
    write_aligned(work, "a", [(e, f) for e in half_a for f in groups[e]])
    french = [f for e in half_b for f in groups[e]][:mono]
    (work / "mono.fr").write_text("".join(f + "\n" for f in french), encoding="utf-8")
    return {"test_pairs": sum(len(groups[e]) for e in test),
            "half_a_pairs": sum(len(groups[e]) for e in half_a), "monolingual": len(french)}


def nmt(*args: str, log: list[str]) -> str:
    """Run ``python -m nmt ARGS``; its stdout (a failure ends the benchmark, saying why)."""
    cmd = [sys.executable, "-m", "nmt", *args]
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    log.append(f"$ nmt {' '.join(args)}  ({time.perf_counter() - start:.0f} s)")
    if done.returncode != 0:
        raise SystemExit(f"nmt {' '.join(args)} failed ({done.returncode}): "
                         f"{done.stderr.strip()[-500:]}")
    return done.stdout


def bench_backtranslation(corpus_zip: Path, out: Path, steps: int, mono: int) -> dict[str, Any]:
    work = out / "work"
    runs = work / "runs"
    work.mkdir(parents=True, exist_ok=True)
    sizes = split_corpus(corpus_zip, work, mono)
    log: list[str] = []
    common = ["--config", str(CONFIGS / "demo.toml"), "--runs-dir", str(runs), "--overwrite",
              "--data-dir", str(work / "data"), "--set", f"train.max_steps={steps}",
              "--set", "train.max_minutes=0", "--set", f"data.test={work / 'test'}"]
    start = time.perf_counter()
    nmt("train", *common, "--run-name", "reverse", "--set", f"data.corpus={work / 'a'}",
        "--set", "data.source=fr", "--set", "data.target=en", log=log)
    nmt("backtranslate", "--run", str(runs / "reverse"), "--input", str(work / "mono.fr"),
        "--output", str(work / "bt"), "--search", "sample", "--top-k", "10", log=log)
    nmt("train", *common, "--run-name", "baseline", "--set", f"data.corpus={work / 'a'}",
        log=log)
    mixed = work / "with-bt.toml"  # the demo's settings, the two sources for data
    mixed.write_text((CONFIGS / "demo.toml").read_text(encoding="utf-8")
                     + f'\n[[data.sources]]\ncorpus = "{work / "a"}"\n'
                     f'\n[[data.sources]]\ncorpus = "{work / "bt"}"\nback_translated = true\n',
                     encoding="utf-8")
    nmt("train", "--config", str(mixed), *common[2:], "--run-name", "with-bt", log=log)
    result: dict[str, Any] = {"machine": machine(), "steps": steps, **sizes, "log": log}
    for name in ("baseline", "with-bt"):
        report = json.loads(nmt("bleu", "--run", str(runs / name), "--data-dir",
                                str(work / "data"), "--json", log=log).strip().splitlines()[-1])
        result[name] = {"bleu": report["multi"]["bleu"], "chrf": report["multi"]["chrf"],
                        "sentences": report["sentences"]}
    result["minutes"] = round((time.perf_counter() - start) / 60, 1)
    return result


def markdown(r: dict[str, Any]) -> str:
    base, bt = r["baseline"], r["with-bt"]
    m = r["machine"]
    return "\n".join([
        f"`python -m bench.backtranslation --steps {r['steps']} --mono {r['monolingual']}`, "
        f"{m.get('cpu', '?')}, {m.get('date', '?')}, commit {m.get('commit', '?')}; "
        f"{r['minutes']} minutes in all.", "",
        f"Test set: {r['test_pairs']:,} pairs ({TEST_GROUPS:,} English sentences); half A: "
        f"{r['half_a_pairs']:,} pairs; monolingual French: {r['monolingual']:,} lines, "
        "back-translated by fr->en trained on half A (top-10 sampling).", "",
        "| en->fr, `configs/demo.toml`, same steps | test BLEU (all refs) | chrF |",
        "|---|---:|---:|",
        f"| half A | {base['bleu']:.2f} | {base['chrf']:.2f} |",
        f"| half A + back-translated (tagged) | {bt['bleu']:.2f} | {bt['chrf']:.2f} |",
    ]) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.backtranslation",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "data" /
                   "fra-eng.zip", help="fra-eng.zip")
    p.add_argument("--steps", type=int, default=600, help="training steps of each model")
    p.add_argument("--mono", type=int, default=40000, help="monolingual lines at most")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "backtranslation")
    args = p.parse_args(argv)
    if not args.corpus.is_file():
        raise SystemExit(f"--corpus {args.corpus}: not found")
    result = bench_backtranslation(args.corpus, args.out, args.steps, args.mono)
    write_results(args.out, "backtranslation", result, markdown(result))


if __name__ == "__main__":
    main()
