"""Data preparation timed: ``nmt data prepare`` on the whole corpus, fresh and from its cache."""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.processes import child_env, run_child
from nmt.errors import NmtError


def data_preparation(data_dir: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    """``nmt data prepare`` (default data config) into a fresh data directory, then again."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="nmt-bench-data-") as tmp:
        shutil.copytree(data_dir / "fra-eng", Path(tmp) / "fra-eng")  # no download in the timing
        for step in ("fresh cache", "cache hit"):
            child = run_child([sys.executable, "-m", "nmt", "data", "prepare",
                               "--data-dir", tmp], env=child_env())
            if child.returncode != 0:
                raise NmtError(f"nmt data prepare ({step}): exited with status "
                               f"{child.returncode}: {child.stderr.strip()[-300:]}")
            rows.append({"step": step, "seconds": round(child.seconds, 2),
                         "peak_rss_mb": round(child.peak_rss_mb)})
            log(f"  prepare, {step}: {child.seconds:.1f} s, peak RSS {child.peak_rss_mb:.0f} MB")
    return {"config": "defaults (no --config)", "rows": rows}


def markdown(result: dict[str, Any]) -> str:
    """The table of bench.md and docs/BENCHMARKS.md."""
    lines = ["| step | seconds | peak RSS MB |", "|---|---:|---:|"]
    lines += [f"| {r['step']} | {r['seconds']} | {r['peak_rss_mb']:,} |" for r in result["rows"]]
    return "\n".join(lines)
