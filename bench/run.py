"""``make bench``: every CPU benchmark in one invocation, printed as Markdown tables and written
to ``bench.json`` and ``bench.md``.

``python -m bench --out bench/out --baseline PATH --corpus PATH [--decode-run runs/demo]``. The
parts: data preparation (:mod:`bench.data`), training against the textbook recipe and the
full-corpus configs (:mod:`bench.training`), decoding (:mod:`bench.decoding`) and the
CTranslate2 export (:mod:`bench.export`). The load average at the start and the end is recorded
because a shared machine changes every absolute figure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench import CONFIGS, ROOT
from bench.machine import load_average, machine
from bench.training import (
    D2L_MODELS,
    FULL_CONFIGS,
    FullRun,
    d2l_comparison,
    d2l_markdown,
    find_corpus_zip,
    full_corpus_markdown,
    full_corpus_training,
)
from nmt.errors import NmtError

OUT = ROOT / "bench" / "out"
PARTS = ("data", "d2l", "train", "decode", "export")


def markdown(result: dict[str, Any]) -> str:
    """The whole result as the Markdown of bench.md and docs/BENCHMARKS.md."""
    m = result["machine"]
    out = [f"Command: `{result['command']}`. Machine: {m['cpu']}, {m['cores']} cores, torch "
           f"{m['torch']}, Python {m['python']}. Date {m['date']}, commit {m['commit']}. "
           f"Load average (1/5/15 min) {result['load_start']} at the start, "
           f"{result['load_end']} at the end; {result['seconds']:.0f} s in all.", ""]
    if "d2l" in result:
        out += ["### Training against the recipe (d2l presets, tokens/s)", "",
                d2l_markdown(result["d2l"], m["torch_default_threads"]), ""]
    if "train" in result:
        out += ["### Full-corpus configs on the CPU (fp32, no validation)", "",
                full_corpus_markdown(result["train"]), ""]
    if "decode" in result:
        from bench.decoding import markdown as decode_markdown

        out += ["### Greedy decoding (bench/decoding.py)", "",
                decode_markdown(result["decode"]), ""]
    if "export" in result:
        from bench.export import markdown as export_markdown

        out += ["### nmt against CTranslate2 exports (bench/export.py)", "",
                export_markdown(result["export"]), ""]
    if "data" in result:
        from bench.data import markdown as data_markdown

        out += ["### Data preparation (`nmt data prepare`, whole corpus, default data config)", "",
                data_markdown(result["data"]), ""]
    return "\n".join(out)


def run_benchmarks(out_dir: Path, *, parts: Sequence[str] = PARTS, d2l_epochs: int = 40,
                   repeats: int = 2, shipped_timeout: float = 120.0,
                   full_plan: Sequence[FullRun] = FULL_CONFIGS,
                   decode_run: Path | None = None, decode_sample: int = 100,
                   decode_threads: int = 0, data_dir: Path | None = None,
                   baseline: Path | None = None, corpus: Path | None = None,
                   log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the chosen ``parts``; write ``out_dir/bench.json`` and ``bench.md``; return the dict.

    ``baseline``: the textbook recipe script (d2l_recipe.py) and ``corpus``: the fra-eng.zip it
    reads (or its folder); without either, the recipe's side of the comparison is skipped.
    """
    from nmt.config import load_config
    from nmt.data.download import default_data_dir
    from nmt.data.prepare import prepare

    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise NmtError(f"--out {out_dir}: cannot create it ({e.strerror})") from None
    data_dir = (data_dir or default_data_dir()).resolve()  # the children run in the repository
    start = time.perf_counter()
    result: dict[str, Any] = {"machine": machine(), "load_start": load_average(),
                              "command": "python -m bench " + " ".join(sys.argv[1:])}
    # Caches first, outside every timing, so no child's peak memory is SentencePiece training.
    configs = [f"d2l-{m}" for m in D2L_MODELS] if "d2l" in parts else []
    configs += [run.name for run in full_plan] if "train" in parts else []
    for name in configs:
        prepare(load_config(CONFIGS / f"{name}.toml").data, data_dir, log=lambda s: None)
    if "data" in parts:
        from bench.data import data_preparation

        log("data preparation")
        prepare(load_config(None).data, data_dir, log=lambda s: None)  # the corpus is there
        result["data"] = data_preparation(data_dir, log)
    if "d2l" in parts:
        log(f"training against the recipe, {d2l_epochs} epochs")
        result["d2l"] = d2l_comparison(d2l_epochs, repeats, zip_path=find_corpus_zip(corpus),
                                       baseline=baseline, data_dir=data_dir,
                                       shipped_timeout=shipped_timeout, log=log)
    if "train" in parts:
        log("full-corpus configs")
        result["train"] = full_corpus_training(full_plan, data_dir=data_dir, log=log)
    if "decode" in parts:
        from bench.decoding import bench_decode

        log("decoding")
        result["decode"] = bench_decode(run_dir=decode_run, out_dir=out_dir,
                                        sample=decode_sample, threads=decode_threads,
                                        data_dir=data_dir, log=log)
    if "export" in parts:
        if decode_run is None:
            log("export: skipped (needs a trained run: --decode-run runs/NAME)")
        else:
            from bench.export import bench_export

            log("export to CTranslate2")
            result["export"] = bench_export(decode_run, out_dir, data_dir=data_dir, log=log)
    result["load_end"] = load_average()
    result["seconds"] = round(time.perf_counter() - start, 1)
    (out_dir / "bench.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    (out_dir / "bench.md").write_text(markdown(result) + "\n", encoding="utf-8")
    return result


def _existing(path: Path | None, option: str) -> Path | None:
    """``path`` when it exists; a one-line error naming ``option`` when it was given but is not
    there (a typo should not cost a benchmark its comparison silently)."""
    if path is not None and not path.exists():
        raise NmtError(f"{option} {path}: not found")
    return path


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench",
                                description="CPU benchmarks; see docs/BENCHMARKS.md.")
    p.add_argument("--out", type=Path, default=OUT, help="bench.json, bench.md (default bench/out)")
    p.add_argument("--only", default=",".join(PARTS), help=f"comma-separated: {','.join(PARTS)}")
    p.add_argument("--baseline", type=Path, default=None,
                   help="the textbook recipe script, d2l_recipe.py (without it: ours alone)")
    p.add_argument("--corpus", type=Path, default=None,
                   help="fra-eng.zip or its folder, the recipe's input (default: "
                   "$NMT_DATA_MIRROR)")
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
    args = p.parse_args(argv)
    try:
        parts = [x.strip() for x in args.only.split(",") if x.strip()]
        unknown = sorted(set(parts) - set(PARTS))
        if unknown or not parts:
            raise NmtError(f"--only {args.only}: expected some of {', '.join(PARTS)}")
        if min(args.d2l_epochs, args.repeats, args.decode_sample) < 1 or args.decode_threads < 0:
            raise NmtError("--d2l-epochs, --repeats, --decode-sample: expected values >= 1; "
                           "--decode-threads: >= 0")
        baseline = _existing(args.baseline, "--baseline")
        mirror = os.environ.get("NMT_DATA_MIRROR")  # where `nmt data download` looks too
        corpus = _existing(args.corpus, "--corpus") or (Path(mirror) if mirror else None)
        result = run_benchmarks(args.out, parts=parts, d2l_epochs=args.d2l_epochs,
                                repeats=args.repeats, shipped_timeout=args.shipped_timeout,
                                decode_run=args.decode_run,
                                decode_sample=args.decode_sample,
                                decode_threads=args.decode_threads, data_dir=args.data_dir,
                                baseline=baseline, corpus=corpus)
    except NmtError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
    print(markdown(result))
    print(f"wrote {args.out / 'bench.json'} and {args.out / 'bench.md'}")


if __name__ == "__main__":
    main()
