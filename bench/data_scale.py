"""Preparing large corpora: pairs a second, peak memory and cache size at 1, 5 and 10 million
pairs (``make bench-data``).

Each corpus is generated from the built-in one: pair ``i`` joins two of its pairs drawn at
random (seeded), source to source and target to target, so the text is real English and French
that the filters and the language check judge as they would a real corpus, and almost every
pair is distinct. ``nmt data prepare`` (default data config: filters, language check,
SentencePiece) runs on it in a fresh process; its wall time, the peak resident memory of the
main process (all of it, and its private part: the file pages of a memory-mapped cache count in
the first, not the second) and of the whole process tree (the workers judging pairs and
SentencePiece's trainer included), and the size of the cache are recorded. ``--against DIR``
also runs another checkout of nmt on each size, alternated, for a before/after.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import ROOT
from bench.machine import machine
from bench.processes import child_env, run_child
from nmt.errors import NmtError


def tatoeba_pairs(corpus_zip: Path) -> list[tuple[str, str]]:
    """The built-in corpus' (English, French) pairs."""
    with zipfile.ZipFile(corpus_zip) as z:
        name = next(n for n in z.namelist() if n.endswith("fra.txt"))
        text = z.read(name).decode("utf-8")
    return [(row[0], row[1]) for row in (line.split("\t") for line in text.splitlines())
            if len(row) >= 2]


def generate(pairs: list[tuple[str, str]], n: int, prefix: Path, seed: int = 0) -> int:
    """``n`` pairs, each two random ``pairs`` joined, as aligned files ``prefix.en`` and
    ``prefix.fr``; returns their size in bytes."""
    rng = random.Random(seed)
    with open(f"{prefix}.en", "w", encoding="utf-8") as en, \
            open(f"{prefix}.fr", "w", encoding="utf-8") as fr:
        for start in range(0, n, 10_000):
            rows = [(rng.choice(pairs), rng.choice(pairs)) for _ in range(min(10_000, n - start))]
            en.write("".join(f"{a[0]} {b[0]}\n" for a, b in rows))
            fr.write("".join(f"{a[1]} {b[1]}\n" for a, b in rows))
    return sum(Path(f"{prefix}.{lang}").stat().st_size for lang in ("en", "fr"))


def prepare_once(checkout: Path, corpus: Path, work: Path) -> dict[str, Any]:
    """``nmt data prepare`` of ``checkout`` on the corpus, into a fresh data directory."""
    data_dir = work / "data"
    shutil.rmtree(data_dir, ignore_errors=True)
    env = {**child_env(), "PYTHONPATH": str(checkout)}
    # run in the checkout: `python -m nmt` imports the working directory's nmt first
    child = run_child([sys.executable, "-m", "nmt", "data", "prepare", "--data-dir",
                       str(data_dir), "--set", f"data.corpus={corpus}"], env=env,
                      timeout=4 * 3600, poll=0.1, cwd=checkout)
    if child.returncode != 0:
        raise NmtError(f"nmt data prepare ({checkout}): exited with status {child.returncode}: "
                       f"{child.stderr.strip()[-300:]}")
    caches = [p for p in (data_dir / "cache").iterdir() if not p.name.startswith(".")]
    size = sum(f.stat().st_size for f in caches[0].rglob("*") if f.is_file())
    kept = json.loads((caches[0] / "meta.json").read_text())["counts"]["kept"]
    shutil.rmtree(data_dir)
    return {"seconds": round(child.seconds, 1), "peak_rss_mb": round(child.peak_rss_mb),
            "peak_anon_mb": round(child.peak_anon_mb),
            "peak_tree_rss_mb": round(child.peak_tree_rss_mb), "cache_mb": round(size / 2**20),
            "kept": kept}


def commit(checkout: Path) -> str:
    """The checkout's commit, and whether its tracked files differ from it (what is measured
    is the working tree)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(checkout), *args], capture_output=True,
                              text=True).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "?"
    changed = git("status", "--porcelain", "--untracked-files=no")
    return f"{head} (with uncommitted changes)" if changed else head


def bench_data_scale(sizes: list[int], corpus_zip: Path, against: Path | None = None,
                     work_root: Path | None = None,
                     log: Callable[[str], None] = print) -> dict[str, Any]:
    pairs = tatoeba_pairs(corpus_zip)
    checkouts = [ROOT] + ([against] if against else [])
    rows = []
    with tempfile.TemporaryDirectory(prefix="nmt-bench-data-", dir=work_root) as tmp:
        work = Path(tmp)
        for n in sizes:
            text = generate(pairs, n, work / "corpus")
            log(f"{n:,} pairs: {text / 2**20:,.0f} MB of text")
            for checkout in checkouts:
                r = prepare_once(checkout, work / "corpus", work)
                r.update(pairs=n, text_mb=round(text / 2**20), commit=commit(checkout),
                         pairs_per_second=round(n / r["seconds"]))
                rows.append(r)
                log(f"  {r['commit']}: {r['seconds']} s ({r['pairs_per_second']:,} pairs/s), "
                    f"peak RSS {r['peak_rss_mb']:,} MB (private {r['peak_anon_mb']:,}, with "
                    f"workers {r['peak_tree_rss_mb']:,}), cache {r['cache_mb']:,} MB")
    return {"machine": machine(), "rows": rows}


def markdown(result: dict[str, Any]) -> str:
    lines = ["| pairs | text MB | commit | seconds | pairs/s | main process: peak RSS MB | "
             "its private memory MB | with its children MB | cache MB | kept |",
             "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['pairs']:,} | {r['text_mb']:,} | {r['commit']} | {r['seconds']} | "
              f"{r['pairs_per_second']:,} | {r['peak_rss_mb']:,} | {r['peak_anon_mb']:,} | "
              f"{r['peak_tree_rss_mb']:,} | {r['cache_mb']:,} | {r['kept']:,} |"
              for r in result["rows"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.data_scale", description=__doc__)
    ap.add_argument("--sizes", default="1000000,5000000,10000000",
                    help="corpus sizes in pairs, comma-separated")
    ap.add_argument("--corpus", type=Path, default=ROOT / "data" / "fra-eng.zip",
                    help="the built-in corpus' zip (fra-eng.zip)")
    ap.add_argument("--against", type=Path, help="another nmt checkout to run beside this one")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    args = ap.parse_args(argv)
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s]
    result = bench_data_scale(sizes, args.corpus, args.against)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "data_scale.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out / "data_scale.md").write_text(markdown(result) + "\n")
    print(markdown(result))


if __name__ == "__main__":
    main()
