"""Decoding speed on CPU: the recipe's way (one sentence at a time, re-running the prefix) against
batched search with the incremental state, on a run's test split.

``python -m bench.decoding --run runs/NAME`` prints a Markdown table and writes
``decode.json``; :func:`bench_decode` is what ``make bench`` calls. Every figure compares
methods on the *same* sentences with the same model; the slow baselines run on a fixed sample
(``--sample``) so the whole benchmark stays within a few minutes on two cores. Without a run,
a randomly initialised model of ``configs/demo.toml``'s size is measured (outputs then run to the
length limit, so per-token figures are the meaningful ones) and the report says so.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from bench import CONFIGS, ROOT
from nmt.config import Config, DecodeConfig, load_config
from nmt.data.tokenizers import BOS_ID, EOS_ID, Tokenizer
from nmt.errors import NmtError
from nmt.models.base import EncoderDecoder
from nmt.translation.search import Hypothesis, search_ids
from nmt.translation.translator import source_cut, source_ids

DEMO_CONFIG = CONFIGS / "demo.toml"


def _timed(fn: Callable[[], list[Hypothesis]], repeat: int = 1) -> tuple[float, list[Hypothesis]]:
    """Best wall time of ``repeat`` runs (the least disturbed by other processes)."""
    best, out = float("inf"), []
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def _row(name: str, seconds: float, hyps: Sequence[Hypothesis], n_sent: int) -> dict[str, Any]:
    tokens = sum(len(h.tokens) + int(h.finished) for h in hyps)  # decoder steps, <eos> included
    return {"method": name, "sentences": n_sent, "seconds": round(seconds, 3),
            "sentences_per_s": round(n_sent / seconds, 1), "tokens_per_s": round(tokens / seconds),
            "target_tokens": tokens}


@torch.no_grad()
def fixed_length_step_times(
    model: EncoderDecoder, src_ids: list[list[int]], lengths: Sequence[int]
) -> list[dict[str, Any]]:
    """Seconds to produce exactly T tokens per sentence, cached vs uncached, for each T.

    ``<eos>`` is ignored so every row runs T steps: this isolates how the cache's gain grows
    with the output length (uncached work grows as T^2, cached as T).
    """
    from nmt.translation.search import pad_batch

    device = next(model.parameters()).device
    src, src_lengths = pad_batch(src_ids, device)
    memory = model.encode(src, src_lengths)
    def run(t: int, cached: bool) -> float:
        start = time.perf_counter()
        last = torch.full((src.size(0), 1), BOS_ID, dtype=torch.long, device=device)
        state = model.init_state(memory) if cached else None
        prefix = last
        for _ in range(t):
            if cached:
                output = model.decode(last, memory, state)
                state = output.state
            else:
                output = model.decode(prefix, memory, None)
            last = output.logits[:, -1].argmax(-1, keepdim=True)
            last = last.masked_fill(last == EOS_ID, BOS_ID + 2)  # <eos> -> a word: T steps
            if not cached:
                prefix = torch.cat([prefix, last], dim=1)
        return time.perf_counter() - start

    out = []
    for t in lengths:
        # best of 3 (of 1 for the long uncached runs, which take tens of seconds)
        times = {"cached": min(run(t, True) for _ in range(3)),
                 "uncached": min(run(t, False) for _ in range(3 if t <= 32 else 1))}
        out.append({"output_tokens": t, "cached_s": round(times["cached"], 3),
                    "uncached_s": round(times["uncached"], 3),
                    "speedup": round(times["uncached"] / times["cached"], 2)})
    return out


def cli_wall_time(run_dir: Path | None, repeat: int = 3) -> dict[str, float]:
    """Median seconds of ``nmt translate "i'm home ."`` from process start to exit, and of
    importing the CLI alone (what ``nmt --help`` pays)."""
    from bench.startup import time_once

    def median_of(cmd: list[str]) -> float:
        return round(statistics.median(time_once(cmd)[0] for _ in range(repeat)), 2)

    translate = [sys.executable, "-m", "nmt", "translate", "--device", "cpu", "i'm home ."]
    if run_dir is not None:
        translate[4:4] = ["--run", str(run_dir.resolve())]  # the command runs in the repository
    result = {"python_startup_s": median_of([sys.executable, "-c", "pass"]),
              "import_cli_s": median_of([sys.executable, "-c", "import nmt.cli"]),
              "import_torch_s": median_of([sys.executable, "-c", "import torch"])}
    if run_dir is not None:
        result["translate_one_sentence_s"] = median_of(translate)
    return result


def _load(run_dir: Path | None, data_dir: Path | None) -> tuple[
        EncoderDecoder, Tokenizer, Config, list[str], str]:
    from nmt.data.download import default_data_dir
    from nmt.data.prepare import prepare

    if run_dir is not None:
        from nmt.evaluate import trained_data
        from nmt.runs.loading import load_run

        run = load_run(run_dir, "best", "cpu")
        prepared = trained_data(run.run_dir, run.config.data, data_dir, log=lambda s: None)
        sources, _ = prepared.splits["test"].grouped()
        return run.model, run.tokenizer, run.config, sources, f"{run_dir} (step {run.step})"
    from nmt.models.build import build_model

    cfg = load_config(DEMO_CONFIG)
    prepared = prepare(cfg.data, data_dir or default_data_dir(), log=lambda s: None)
    tok = prepared.tokenizer
    torch.manual_seed(0)
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size,
                        joint_vocab=tok.joint).eval()
    sources, _ = prepared.splits["test"].grouped()
    what = f"random init, {DEMO_CONFIG.relative_to(ROOT)} size (no trained run)"
    return model, tok, cfg, sources, what


def bench_decode(
    run_dir: Path | None = None,
    out_dir: Path | None = None,
    sample: int = 100,
    threads: int = 0,
    data_dir: Path | None = None,
    log: Callable[[str], None] = print,
    cli_repeat: int = 3,
    forced_lengths: Sequence[int] = (8, 16, 32, 64, 128),
) -> dict[str, Any]:
    """Measure decoding on CPU; returns (and writes ``out_dir/decode.json``) the figures.

    ``sample``: sentences for the slow baselines (one at a time, uncached); the fast paths also
    run on the whole test split. ``cli_repeat``: runs per CLI timing (0: skip them).
    """
    if threads > 0:
        torch.set_num_threads(threads)
    load_start = os.getloadavg()[0]  # other jobs on the machine change every figure
    model, tok, cfg, sources, what = _load(run_dir, data_dir)
    limit, keep_eos = source_cut(model, None, cfg.data.truncate)  # as `nmt translate` cuts
    ids = [source_ids(tok, s, limit, keep_eos)[0] for s in sources]
    picked = random.Random(0).sample(range(len(ids)), min(sample, len(ids)))
    few = [ids[i] for i in picked]
    base = replace(cfg.decode, beam=1)
    batch = base.batch_size
    log(f"decoding benchmark: {what}; {len(ids)} test sources, sample {len(few)}, "
        f"batch {batch}, {torch.get_num_threads()} threads")

    def run(name: str, data: list[list[int]], dcfg: DecodeConfig, repeat: int = 1,
            **kw: Any) -> dict[str, Any]:
        seconds, hyps = _timed(lambda: search_ids(model, data, dcfg, **kw), repeat)
        row = _row(name, seconds, hyps, len(data))
        log(f"  {name}: {row['seconds']} s, {row['sentences_per_s']} sentences/s, "
            f"{row['tokens_per_s']} tokens/s")
        return row

    one = replace(base, batch_size=1)
    # the two ends of the headline ratio are each the best of 3 runs, the least disturbed
    # by other processes on a shared machine
    cached = f"batch {batch}, cached"
    rows = [
        run("recipe: 1 at a time, uncached", few, one, repeat=3, method="uncached"),
        run("1 at a time, cached", few, one),
        run(f"batch {batch}, uncached", few, base, method="uncached"),
        run(cached, few, base, repeat=3),
        run(f"{cached}, finished rows dropped at once", few, base, repeat=3, prune_at=0.0),
        run(f"{cached}, finished rows kept (fed <pad>)", few, base, repeat=3, prune_at=1.0),
        run(f"batch {batch}, beam 4", few, replace(base, beam=4)),
    ]
    full = [
        run(f"test split, {cached}", ids, base, repeat=3),
        run(f"test split, {cached}, finished rows dropped at once", ids, base, prune_at=0.0),
        run(f"test split, {cached}, finished rows kept (fed <pad>)", ids, base, prune_at=1.0),
    ]
    by = {r["method"]: r for r in rows + full}
    recipe = by["recipe: 1 at a time, uncached"]["sentences_per_s"]
    summary = {
        "batched_cached_vs_recipe": round(by[cached]["sentences_per_s"] / recipe, 1),
        # the whole split, length-sorted into batches, against the recipe's rate on the sample
        "test_split_batched_cached_vs_recipe_rate": round(full[0]["sentences_per_s"] / recipe, 1),
        "cache_alone_at_batch_1": round(by["1 at a time, cached"]["sentences_per_s"] / recipe, 2),
        f"cache_alone_at_batch_{batch}": round(
            by[cached]["sentences_per_s"] / by[f"batch {batch}, uncached"]["sentences_per_s"], 2),
        "drop_finished_vs_keep_them_test_split": round(
            full[0]["sentences_per_s"] / full[2]["sentences_per_s"], 2),
        "drop_at_a_fifth_vs_at_once_test_split": round(
            full[0]["sentences_per_s"] / full[1]["sentences_per_s"], 2),
    }
    # 32 sentences: the uncached pass projects every prefix position to the vocabulary, so its
    # cost grows as T^2 * V and long forced outputs would dominate the benchmark's time
    lengths = fixed_length_step_times(model, few[:32], forced_lengths)
    for r in lengths:
        log(f"  {r['output_tokens']} tokens: cached {r['cached_s']} s, uncached "
            f"{r['uncached_s']} s, x{r['speedup']}")
    result = {
        "model": what, "arch": cfg.model.arch, "device": "cpu", "threads": torch.get_num_threads(),
        "torch": torch.__version__, "python": platform.python_version(),
        "machine": platform.machine(), "test_sources": len(ids), "sample": len(few),
        "batch_size": batch, "sample_rows": rows, "full_rows": full, "summary": summary,
        "by_output_length": lengths,
        "load_average": [round(load_start, 2), round(os.getloadavg()[0], 2)],
        "cli": cli_wall_time(run_dir, cli_repeat) if cli_repeat > 0 else {},
    }
    log(f"  summary: {summary}; cli: {result['cli']}")
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "decode.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


def markdown(result: dict[str, Any]) -> str:
    """The figures as the Markdown tables of docs/BENCHMARKS.md."""
    lines = [f"Model: {result['model']}, {result['arch']}; CPU, {result['threads']} threads, "
             f"torch {result['torch']}; batch {result['batch_size']}.", "",
             "| method | sentences | seconds | sentences/s | target tokens/s |",
             "|---|---:|---:|---:|---:|"]
    for r in result["sample_rows"] + result["full_rows"]:
        lines.append(f"| {r['method']} | {r['sentences']} | {r['seconds']} | "
                     f"{r['sentences_per_s']} | {r['tokens_per_s']} |")
    lines += ["", "| output tokens (forced) | cached s | uncached s | cache speed-up |",
              "|---:|---:|---:|---:|"]
    for r in result["by_output_length"]:
        lines.append(f"| {r['output_tokens']} | {r['cached_s']} | {r['uncached_s']} | "
                     f"{r['speedup']}x |")
    lines += ["", "Summary: " + ", ".join(f"{k} {v}x" for k, v in result["summary"].items()),
              "Load average at start and end: {} and {}.".format(*result["load_average"]),
              "CLI: " + ", ".join(f"{k} {v} s" for k, v in result["cli"].items())]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.decoding",
                                description=__doc__.split("\n")[0])
    p.add_argument("--run", type=Path, default=None, help="runs/NAME (default: random demo model)")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    p.add_argument("--sample", type=int, default=100)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--data-dir", type=Path, default=None)
    args = p.parse_args(argv)
    try:
        result = bench_decode(args.run, args.out, args.sample, args.threads, args.data_dir)
    except NmtError as e:
        raise SystemExit(f"error: {e}") from None
    print(markdown(result))


if __name__ == "__main__":
    main()
