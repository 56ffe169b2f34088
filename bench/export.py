"""Export benchmark: ``nmt``'s own decoding against CTranslate2 fp32 and int8 exports of a run.

``python -m bench.export --run runs/NAME`` (and ``make bench``'s ``export`` part) exports the
run's best checkpoint twice (float32 and int8 weights) under ``--out``, then translates the whole
test split, text in and text out, with each engine at 1 and 2 threads, greedy and beam 4 (nmt
in fp32, and also in bf16 where the CPU has bf16 units and nmt decodes in it by default):
sentences per second, the share of lines identical to ``nmt``'s output with the same search,
corpus BLEU (all references), and the size on disk. Every greedy line where CTranslate2 fp32
and ``nmt`` differ is explained in ``export-diffs.jsonl``: the first differing step and, under
the PyTorch model, the log-probability gap between the two tokens there (a gap near 0 is a
near-tie that float rounding decides). Timings on a shared machine are indicative.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from bench import ROOT
from nmt.data.tokenizers import BOS_ID, EOS_ID
from nmt.errors import NmtError

SEARCHES = (1, 4)
THREADS = (1, 2)


def _dir_mb(path: Path) -> float:
    return round(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6, 2)


def _divergence(model: Any, src: list[int], ours: list[int], theirs: list[int]) -> dict[str, Any]:
    """First step where two greedy outputs differ and nmt's log-probability gap there."""
    step = next((i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b),
                min(len(ours), len(theirs)))
    mine = ours[step] if step < len(ours) else EOS_ID
    other = theirs[step] if step < len(theirs) else EOS_ID
    with torch.no_grad():
        s = torch.tensor([src])
        memory = model.encode(s, torch.tensor([len(src)]))
        logits = model.decode(torch.tensor([[BOS_ID] + ours[:step]]), memory).logits[0, -1]
    logp = torch.log_softmax(logits.float(), dim=-1)
    return {"step": step, "logprob_gap": round(float(logp[mine] - logp[other]), 6)}


def bench_export(
    run_dir: Path,
    out_dir: Path,
    *,
    threads: Sequence[int] = THREADS,
    searches: Sequence[int] = SEARCHES,
    data_dir: Path | None = None,
    split: str = "test",
    limit: int = 0,
    rounds: int = 1,
    batch_size: int | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Measure (see the module docstring); writes ``out_dir/export.json`` and returns it.
    ``rounds``: each engine times the whole split this many times, the engines alternated round
    by round; the median is reported. ``batch_size``: sentences per batch for every engine
    (None: the run's ``decode.batch_size``)."""
    from nmt.data.normalize import normalize
    from nmt.device import decode_dtype
    from nmt.evaluate import corpus_scores
    from nmt.export import require_ctranslate2
    from nmt.runs.loading import load_run
    from nmt.translation.search import search_ids
    from nmt.translation.translator import Translator, source_cut, source_ids

    require_ctranslate2("bench export")
    import ctranslate2

    from nmt.evaluate import trained_data
    from nmt.export.ct2_convert import export_run
    from nmt.export.ct2_translate import CT2Translator

    run = load_run(run_dir, "best", "cpu")
    prepared = trained_data(run.run_dir, run.config.data, data_dir, log=lambda s: None)
    if split not in prepared.splits:
        raise NmtError(f"--split {split}: expected one of {', '.join(prepared.splits)}")
    sources, refs = prepared.splits[split].grouped()
    if limit > 0:
        sources, refs = sources[:limit], refs[:limit]
    out_dir.mkdir(parents=True, exist_ok=True)
    exports = {q: export_run(run, out_dir / f"export-{q}", None if q == "float32" else q,
                             overwrite=True) for q in ("float32", "int8")}
    params = sum(p.numel() for p in run.model.parameters())
    sizes = {"checkpoint_mb": round(run.checkpoint_path.stat().st_size / 1e6, 2),
             "weights_fp32_mb": round(params * 4 / 1e6, 2),
             **{f"export_{q}_mb": _dir_mb(p) for q, p in exports.items()},
             **{f"export_{q}_model_bin_mb": round((p / "model.bin").stat().st_size / 1e6, 2)
                for q, p in exports.items()}}
    log(f"export benchmark: {run.run_dir}, {len(sources)} {split} sources, threads "
        f"{list(threads)}, beams {list(searches)}")
    load_start = os.getloadavg()
    bf16_default = decode_dtype(torch.device("cpu"), "auto") == torch.bfloat16
    rows: list[dict[str, Any]] = []
    reference: dict[int, list[str]] = {}  # nmt's output per beam
    outputs: dict[tuple[str, int], list[str]] = {}
    saved_threads = torch.get_num_threads()
    try:
        for t in threads:
            torch.set_num_threads(t)
            for beam in searches:
                # fp32, as the float32 export computes: the identity check compares like with
                # like; and, where the CPU has bf16 units, what nmt decodes in by default there
                engines: list[tuple[str, Any]] = [
                    ("nmt", Translator.from_run(run, beam=beam, batch_size=batch_size,
                                                precision="fp32"))]
                if bf16_default:
                    engines.append(("nmt bf16", Translator.from_run(
                        run, beam=beam, batch_size=batch_size, precision="bf16")))
                engines += [(f"ct2 {q}", CT2Translator.from_export(
                    p, beam=beam, batch_size=batch_size, threads=t))
                            for q, p in exports.items()]
                for _, translator in engines:
                    translator.translate(sources[:64])  # warm-up: first-call allocations
                times: dict[str, list[float]] = {name: [] for name, _ in engines}
                for _ in range(rounds):  # the engines alternated, round by round
                    for name, translator in engines:
                        start = time.perf_counter()
                        hyps = translator.translate(sources)
                        times[name].append(time.perf_counter() - start)
                        outputs.setdefault((name, beam), hyps)
                for name, _ in engines:
                    hyps = outputs[name, beam]
                    if name == "nmt":
                        reference.setdefault(beam, hyps)
                    seconds = statistics.median(times[name])
                    same = sum(a == b for a, b in zip(hyps, reference[beam], strict=True))
                    row = {"threads": t, "beam": beam, "engine": name,
                           "sentences": len(sources), "seconds": round(seconds, 2),
                           "rounds": rounds,
                           "sentences_per_s": round(len(sources) / seconds, 1),
                           "identical_to_nmt": same,
                           "identical_share": round(same / max(len(sources), 1), 4),
                           "bleu": round(corpus_scores(hyps, refs).bleu, 2)}
                    rows.append(row)
                    log(f"  {t} thread(s), beam {beam}, {name}: {row['sentences_per_s']} "
                        f"sentences/s, {same}/{len(sources)} identical, BLEU {row['bleu']}")
    finally:
        torch.set_num_threads(saved_threads)
    for r in rows:
        base = next(x for x in rows if x["threads"] == r["threads"] and x["beam"] == r["beam"]
                    and x["engine"] == "nmt")
        r["speedup_vs_nmt"] = round(r["sentences_per_s"] / base["sentences_per_s"], 2)
    # every greedy fp32 difference, explained at the token level
    diffs = []
    ours_greedy, theirs_greedy = outputs.get(("nmt", 1)), outputs.get(("ct2 float32", 1))
    if ours_greedy is not None and theirs_greedy is not None:
        data = run.config.data
        cut, keep_eos = source_cut(run.model, None, data.truncate)
        greedy = replace(run.config.decode, beam=1, precision="fp32")
        ct2 = CT2Translator.from_export(exports["float32"], threads=1)
        for i, (a, b) in enumerate(zip(ours_greedy, theirs_greedy, strict=True)):
            if a == b:
                continue
            src, _ = source_ids(run.tokenizer, normalize(sources[i], data.lowercase,
                                                         data.normalization), cut, keep_eos)
            ours_ids = search_ids(run.model, [src], greedy)[0].tokens
            theirs_ids = ct2.translate_ids([src])[0]
            diffs.append({"line": i + 1, "source": sources[i], "nmt": a, "ct2": b,
                          **_divergence(run.model, src, ours_ids, theirs_ids)})
        with (out_dir / "export-diffs.jsonl").open("w", encoding="utf-8") as f:
            f.writelines(json.dumps(d, ensure_ascii=False) + "\n" for d in diffs)
    result = {"run": str(run.run_dir), "step": run.step, "split": split,
              "batch_size": batch_size or run.config.decode.batch_size,
              "sentences": len(sources), "params": params, "sizes": sizes, "rows": rows,
              "greedy_fp32_differences": diffs,
              "ctranslate2": ctranslate2.__version__,
              "ct2_cpu_compute_types": sorted(ctranslate2.get_supported_compute_types("cpu")),
              "torch": torch.__version__, "load_average": [list(load_start),
                                                           list(os.getloadavg())]}
    (out_dir / "export.json").write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n",
                                         encoding="utf-8")
    return result


def markdown(result: dict[str, Any]) -> str:
    """The figures as the Markdown tables of docs/BENCHMARKS.md."""
    s = result["sizes"]
    lines = [f"Run {result['run']} (step {result['step']}, {result['params']:,} parameters), "
             f"{result['sentences']} {result['split']} sources in batches of at most "
             f"{result.get('batch_size', '?')}, text in and out; CTranslate2 "
             f"{result['ctranslate2']}, torch {result['torch']}.", "",
             "| threads | search | engine | sentences/s | vs nmt | identical to nmt | BLEU |",
             "|---:|---|---|---:|---:|---:|---:|"]
    for r in result["rows"]:
        search = "greedy" if r["beam"] == 1 else f"beam {r['beam']}"
        lines.append(f"| {r['threads']} | {search} | {r['engine']} | {r['sentences_per_s']:,} | "
                     f"{r['speedup_vs_nmt']}x | {r['identical_share']:.2%} "
                     f"({r['identical_to_nmt']}) | {r['bleu']} |")
    diffs = result["greedy_fp32_differences"]
    gaps = [abs(d["logprob_gap"]) for d in diffs]
    lines += ["", f"Size on disk: checkpoint {s['checkpoint_mb']} MB (with optimizer state), "
              f"fp32 weights {s['weights_fp32_mb']} MB; export float32 {s['export_float32_mb']} "
              f"MB (model.bin {s['export_float32_model_bin_mb']} MB), int8 "
              f"{s['export_int8_mb']} MB (model.bin {s['export_int8_model_bin_mb']} MB).",
              f"Greedy fp32 lines that differ from nmt: {len(diffs)}"
              + (f"; nmt's log-probability gap between the two tokens at the first difference: "
                 f"at most {max(gaps):.4f}, median {sorted(gaps)[len(gaps) // 2]:.4f}"
                 if gaps else ""),
              "Load average at start and end: {} and {}.".format(*result["load_average"])]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.export",
                                description=__doc__.split("\n")[0])
    p.add_argument("--run", type=Path, required=True, help="runs/NAME (its best checkpoint)")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--beams", default="1,4", help="comma-separated beam sizes (1: greedy)")
    p.add_argument("--limit", type=int, default=0, help="only the first N sources")
    p.add_argument("--data-dir", type=Path, default=None)
    p.add_argument("--rounds", type=int, default=1,
                   help="time each engine this many times, alternated; report the median")
    p.add_argument("--batch-size", type=int, default=None,
                   help="sentences per batch, every engine (default: the run's decode.batch_size)")
    args = p.parse_args(argv)
    if args.batch_size is not None and args.batch_size < 1:
        p.error(f"--batch-size: expected a positive number of sentences, got {args.batch_size}")
    try:
        threads = [int(x) for x in args.threads.split(",")]
        beams = [int(x) for x in args.beams.split(",")]
        if 1 not in beams:
            beams.insert(0, 1)
        result = bench_export(args.run, args.out, threads=threads, searches=beams,
                              data_dir=args.data_dir, limit=args.limit,
                              rounds=max(1, args.rounds), batch_size=args.batch_size)
    except ValueError:
        raise SystemExit("error: --threads, --beams: expected comma-separated integers") from None
    except NmtError as e:
        raise SystemExit(f"error: {e}") from None
    print(markdown(result))


if __name__ == "__main__":
    main()
