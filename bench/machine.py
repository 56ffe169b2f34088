"""What every benchmark table is stamped with: the machine, the versions, the commit, the date,
and the load average (a shared machine changes every absolute figure)."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

from bench import ROOT


def machine() -> dict[str, Any]:
    """CPU model, cores, versions, git commit and date: what each table is stamped with."""
    import torch

    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    def git(*args: str) -> str | None:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, text=True, capture_output=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    commit = git("rev-parse", "--short", "HEAD") or None
    # what is measured is the working tree: say when it is not the commit
    changed = git("status", "--porcelain", "--untracked-files=no")
    if commit and changed:
        commit += " (with uncommitted changes)"
    return {"cpu": model, "cores": os.cpu_count(), "torch_default_threads": torch.get_num_threads(),
            "torch": torch.__version__, "python": platform.python_version(),
            "commit": commit, "date": time.strftime("%Y-%m-%d %H:%M %Z")}


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]
