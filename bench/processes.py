"""Child processes measured from outside: exit status, wall time and peak resident memory.

Every benchmark that trains or prepares data runs it in a fresh process, so each figure has its
own peak resident memory (VmHWM) and no run warms the caches of the next.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import ROOT
from nmt.errors import NmtError


@dataclass
class ChildRun:
    """One finished child process: exit status, wall seconds, peak RSS and its output."""

    returncode: int
    seconds: float
    peak_rss_mb: float
    stdout: str
    stderr: str
    peak_tree_rss_mb: float = 0.0  # the most the child and its descendants held at once
    peak_anon_mb: float = 0.0  # the child's own peak private memory (RssAnon: heap and
    # anonymous maps, not the file pages it reads or maps, which the system can reclaim)

    def last_json(self, what: str) -> dict[str, Any]:
        """The last stdout line that is a JSON object (both our child and the recipe print one)."""
        if self.returncode != 0:
            tail = (self.stderr.strip().splitlines() or ["no error output"])[-1]
            raise NmtError(f"{what}: exited with status {self.returncode}: {tail[:300]}")
        for line in reversed(self.stdout.splitlines()):
            if line.startswith("{"):
                return dict(json.loads(line))
        raise NmtError(f"{what}: printed no JSON result line")


def run_child(cmd: Sequence[str], *, env: dict[str, str] | None = None,
              timeout: float = 1800.0, poll: float = 0.02, cwd: Path = ROOT) -> ChildRun:
    """Run ``cmd`` in ``cwd`` (the repository root) to completion; measure its wall time and
    peak memory. ``python -m nmt`` imports the ``nmt`` of ``cwd`` before PYTHONPATH's.

    Two sources, each right where the other is not:

    - ``ru_maxrss`` from ``wait4`` is the exact peak, taken by the kernel at exit, but on Linux
      it also counts the memory this process held at the fork: it is the child's own peak only
      where it exceeds this process's peak (VmHWM), read after the child exits.
    - Otherwise the peak is the child's VmHWM, read from /proc every ``poll`` seconds while it
      runs: a high-water mark, so only growth after the last reading is missed, which for a
      child shorter than a few polls can be nearly all of it.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=err, env=env, cwd=cwd)
        hwm_kb = tree_kb = anon_kb = 0
        scanned = 0.0  # the process tree is scanned every TREE_POLL seconds, not every poll
        try:
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                hwm_kb = max(hwm_kb, _vm_hwm_kb(proc.pid))
                anon_kb = max(anon_kb, _vm_hwm_kb(proc.pid, "RssAnon:"))
                if time.perf_counter() - scanned > TREE_POLL:
                    tree_kb = max(tree_kb, _tree_rss_kb(proc.pid))
                    scanned = time.perf_counter()
                if time.perf_counter() - start > timeout:
                    proc.kill()
                time.sleep(poll)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        # ru_maxrss is in KiB on Linux, in bytes on macOS
        maxrss_kb = usage.ru_maxrss / (1024 if sys.platform == "darwin" else 1)
        rss_kb = maxrss_kb if maxrss_kb > _vm_hwm_kb(os.getpid()) or not hwm_kb else hwm_kb
        return ChildRun(proc.returncode, seconds, rss_kb / 1024,
                        out.read().decode("utf-8", "replace"),
                        err.read().decode("utf-8", "replace"), tree_kb / 1024, anon_kb / 1024)


def _vm_hwm_kb(pid: int, field: str = "VmHWM:") -> int:
    """Peak resident memory of a running process in KiB (``field``: another line of
    /proc/PID/status, in KiB; 0 when /proc cannot say)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


TREE_POLL = 0.5


def _tree_rss_kb(pid: int) -> int:
    """Resident memory of a process and all its descendants now, in KiB (worker processes
    included; 0 when /proc cannot say)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
            rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE") // 1024
        except (OSError, ValueError, IndexError):
            continue
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo += children.get(p, [])
    return total


def child_env(threads: int | None = None) -> dict[str, str]:
    """The environment for a child: threads=None leaves torch's default thread count."""
    env = dict(os.environ)
    for key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.pop(key, None)
        if threads is not None:
            env[key] = str(threads)
    return env
