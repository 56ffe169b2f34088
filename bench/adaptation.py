"""Adapting a model to a domain with ``nmt train --from`` (README, "Adapt a model to your
domain"): what it gains in the domain and what it forgets elsewhere, with and without a share of
the parent's data mixed back in.

``python -m bench.adaptation [--work bench/out/backtranslation/work] [--steps 300]``, after
``python -m bench.backtranslation`` (whose en->fr ``baseline`` run, trained on half A of the
corpus, is the parent, and whose test set is the general one). The domain: questions (English
ending in ``?``) of the corpus' other half, which the parent never saw: 1,000 English sentences
(with all their references) are its test set, the rest (at most ``--pairs``) its training data.
Two children, the same steps at a low learning rate after a short warm-up: one on the questions
alone, one with the parent's half A mixed in at weight 0.2. Writes ``WORK/adaptation.json`` and
``.md``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench import ROOT
from bench.backtranslation import halves, nmt, write_aligned, write_results
from bench.machine import machine

DOMAIN_TEST = 1000


def domain_files(corpus_zip: Path, work: Path, pairs: int, seed: int = 1) -> dict[str, int]:
    """The questions of the half the parent never saw (:func:`bench.backtranslation.halves`,
    the same seed): ``q-test.*`` and ``q-train.*``."""
    h = halves(corpus_zip, seed)
    questions = [e for e in h.half_b if e.rstrip().endswith("?")]
    test, train = questions[:DOMAIN_TEST], questions[DOMAIN_TEST:]
    train_pairs = [(e, f) for e in train for f in h.groups[e]][:pairs]
    test_pairs = [(e, f) for e in test for f in h.groups[e][:1]]  # one reference a line
    write_aligned(work, "q-train", train_pairs)
    write_aligned(work, "q-test", test_pairs)
    return {"domain_train_pairs": len(train_pairs), "domain_test_pairs": len(test_pairs)}


def scores(run: Path, work: Path, log: list[str]) -> dict[str, float]:
    """Greedy BLEU of ``run`` on the domain's test set and on the general one."""
    domain = json.loads(nmt("bleu", "--run", str(run), "--src", str(work / "q-test.en"),
                            "--ref", str(work / "q-test.fr"), "--json",
                            log=log).strip().splitlines()[-1])
    general = json.loads(nmt("bleu", "--run", str(run), "--data-dir", str(work / "data"),
                             "--json", log=log).strip().splitlines()[-1])
    return {"domain_bleu": domain["single"]["bleu"], "general_bleu": general["multi"]["bleu"]}


def bench_adaptation(corpus_zip: Path, work: Path, steps: int, pairs: int) -> dict[str, Any]:
    parent = work / "runs" / "baseline"
    if not (parent / "checkpoints" / "best.pt").is_file():
        raise SystemExit(f"{parent}: not trained; run python -m bench.backtranslation first")
    sizes = domain_files(corpus_zip, work, pairs)
    log: list[str] = []
    result: dict[str, Any] = {"machine": machine(), "steps": steps, **sizes, "log": log,
                              "parent": scores(parent, work, log)}
    common = ["--from", str(parent), "--runs-dir", str(work / "runs"), "--overwrite",
              "--data-dir", str(work / "data"), "--set", f"train.max_steps={steps}",
              "--set", "train.max_minutes=0", "--set", "train.lr=0.0005",
              "--set", "train.warmup_steps=50", "--set", "train.eval_every=100"]
    nmt("train", *common, "--run-name", "questions", "--set",
        f"data.corpus={work / 'q-train'}", log=log)
    result["questions"] = scores(work / "runs" / "questions", work, log)
    mixed = work / "adapt-mixed.toml"
    mixed.write_text(f'[[data.sources]]\ncorpus = "{work / "q-train"}"\n\n'
                     f'[[data.sources]]\ncorpus = "{work / "a"}"\nweight = 0.2\n',
                     encoding="utf-8")
    nmt("train", *common, "--config", str(mixed), "--run-name", "questions-mixed", log=log)
    result["questions-mixed"] = scores(work / "runs" / "questions-mixed", work, log)
    return result


def markdown(r: dict[str, Any]) -> str:
    m = r["machine"]
    rows = [("parent (half A, no questions of the other half)", r["parent"]),
            ("continued on the questions", r["questions"]),
            ("continued on the questions + 0.2 of half A", r["questions-mixed"])]
    return "\n".join([
        f"`python -m bench.adaptation --steps {r['steps']}`, {m.get('cpu', '?')}, "
        f"{m.get('date', '?')}, commit {m.get('commit', '?')}.", "",
        f"Domain: {r['domain_train_pairs']:,} training pairs, {r['domain_test_pairs']:,} test "
        "sentences (one reference each); general: the back-translation benchmark's test set.",
        "", "| model | questions BLEU (1 ref) | general BLEU (all refs) |", "|---|---:|---:|",
        *(f"| {name} | {s['domain_bleu']:.2f} | {s['general_bleu']:.2f} |" for name, s in rows),
    ]) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.adaptation",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "data" /
                   "fra-eng.zip")
    p.add_argument("--work", type=Path, default=ROOT / "bench" / "out" / "backtranslation" /
                   "work")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--pairs", type=int, default=8000)
    args = p.parse_args(argv)
    result = bench_adaptation(args.corpus, args.work, args.steps, args.pairs)
    write_results(args.work, "adaptation", result, markdown(result))


if __name__ == "__main__":
    main()
