"""Long native calls stay stoppable, and their limits are ones the library can meet.

SentencePiece's trainer works for minutes inside one C++ call on a large corpus, where Python
runs no signal handler: Ctrl-C and SIGTERM waited for it (``data.vocab_size=2000000000`` spun
for more than ten minutes, only SIGKILL ended it). :func:`nmt.stoppable.call` runs such a call in
a child; these tests stop a command whose child spins in C (OpenSSL's PBKDF2 over a billion
rounds, which checks no signal either: called in the process itself, SIGTERM leaves it running)
and check it ends at once, in the way the signal asks.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nmt import stoppable
from nmt.config import int_limit, load_config
from nmt.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
T = TypeVar("T")

SPIN = textwrap.dedent("""
    import hashlib, signal, sys
    from nmt import stoppable
    from nmt.process import Terminated, raise_terminated

    signal.signal(signal.SIGTERM, raise_terminated)
    # Ctrl-C as at a terminal, even where the tests run as a background job (whose
    # children start with SIGINT ignored, and then Python leaves it ignored)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    print("started", flush=True)
    try:  # many minutes in C, which checks no signal
        stoppable.call(hashlib.pbkdf2_hmac, "sha256", b"x", b"y", 10**9, what="spinning")
    except Terminated:
        print("terminated", flush=True)
        sys.exit(143)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(130)
""")


def _descendants(pid: int) -> list[int]:
    """The processes under ``pid``: its children, theirs, ... (read from /proc)."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        frontier = [child for child, parent in parents.items() if parent in frontier]
        found += frontier
    return found


def _spinning() -> tuple[subprocess.Popen[str], list[int]]:
    """:data:`SPIN` started, once its native call runs: the process and the ones under it."""
    proc = subprocess.Popen([sys.executable, "-c", SPIN], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 20
        while not _descendants(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        spinning = _descendants(proc.pid)
        assert spinning, "the native call runs in a child"
    except BaseException:
        proc.kill()
        raise
    return proc, spinning


def _assert_gone(pids: list[int]) -> None:
    """None of ``pids`` is left, after at most five seconds."""
    deadline = time.monotonic() + 5
    while any(Path(f"/proc/{pid}").exists() for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in pids if Path(f"/proc/{pid}").exists()]  # none left spinning


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads child processes from /proc")
@pytest.mark.parametrize(("sig", "said", "status"), [
    (signal.SIGTERM, "terminated", 143),
    (signal.SIGINT, "interrupted", 130),
])
def test_a_signal_stops_a_native_call_at_once(sig: signal.Signals, said: str,
                                              status: int) -> None:
    proc, spinning = _spinning()
    try:
        time.sleep(0.3)
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=10)  # the call would take many minutes
    finally:
        proc.kill()
    assert proc.returncode == status and out.strip() == said
    _assert_gone(spinning)


def test_a_call_returns_its_value_or_raises_its_exception_here() -> None:
    assert stoppable.call(re.sub, "a", "b", "banana") == "bbnbnb"
    assert stoppable.call(bytes, 5_000_000) == bytes(5_000_000)  # more than a pipe holds
    with pytest.raises(ValueError, match="invalid literal for int"):  # raised in the child
        stoppable.call(int, "from the child")
    with pytest.raises(stoppable.ChildFailed, match="spinning: its process ended without an "
                       "answer"):
        stoppable.call(os._exit, 3, what="spinning")


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=int_limit("data.vocab_size") + 1, max_value=2**63))
def test_a_vocabulary_sentencepiece_cannot_train_is_refused_when_parsed(size: int) -> None:
    with pytest.raises(ConfigError, match=r"data\.vocab_size: expected at most 1048576"):
        load_config(ROOT / "configs" / "demo.toml", [f"data.vocab_size={size}"])


@pytest.mark.skipif(not sys.platform.startswith("linux") or not Path("/proc").is_dir(),
                    reason="PR_SET_PDEATHSIG and /proc are Linux's")
def test_the_child_dies_with_its_parent_even_by_sigkill() -> None:
    proc, spinning = _spinning()
    proc.kill()  # SIGKILL: the parent cannot pass it on
    proc.wait()
    _assert_gone(spinning)


def _ctrl_c_at_a_terminal(script: str, env: dict[str, str], first: str,
                          ready: Callable[[subprocess.Popen[str]], T], timeout: float
                          ) -> tuple[int, str, str, T]:
    """``script`` run in a process group of its own, as a terminal's job; once it printed
    ``first`` and ``ready(process)`` returned, Ctrl-C as a terminal sends it (SIGINT to the
    whole group): its exit status, output, error output, and what ``ready`` returned."""
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == first
        got = ready(proc)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=timeout)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, out, err, got


class Lengths:
    """Rules for :func:`nmt.data.parallel_pairs.judged_pairs` (picklable: a worker imports this
    module): each pair's source length; each chunk judged in a worker leaves a mark in
    ``$MARKS``."""

    def verdicts(self, pairs: list[tuple[str, str]]) -> list[int]:
        marks = os.environ.get("MARKS")
        if marks and os.getpid() != int(os.environ["JUDGING_PARENT"]):
            (Path(marks) / f"{os.getpid()}-{time.monotonic_ns()}").touch()
        return [len(s) for s, _ in pairs]


JUDGING = textwrap.dedent("""
    import itertools, os, signal, sys, time
    import nmt.data.parallel_pairs as parallel
    from test_reliability_native import Lengths

    signal.signal(signal.SIGINT, signal.default_int_handler)  # as at a terminal (see SPIN)
    os.environ["JUDGING_PARENT"] = str(os.getpid())
    parallel.SERIAL_PAIRS, parallel.CHUNK = 10, 100

    def pairs():  # three chunks for the workers, then nothing for a minute: they wait for work
        for i in itertools.count():
            if i == 10 + 3 * 100:
                print("waiting", flush=True)
                time.sleep(60)
            yield f"a{i}", "b"

    try:
        for _ in parallel.judged_pairs(Lengths(), pairs(), workers=2):
            pass
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(130)
""")


def test_ctrl_c_while_workers_judge_pairs_stops_the_command_alone(tmp_path: Path) -> None:
    """Ctrl-C at a terminal goes to every process of its group, the workers that judge a large
    corpus' pairs too: the command stops as interrupted, at once, and nothing else is said.
    Before, a worker waiting for work died of it with a traceback printed, and one interrupted
    with results unsent could keep the command from ever ending."""
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")]),
           "MARKS": str(marks)}

    def judged(proc: subprocess.Popen[str]) -> None:
        deadline = time.monotonic() + 60
        while len(list(marks.iterdir())) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(list(marks.iterdir())) == 3, "the workers judged the three chunks"
        time.sleep(0.3)  # and wait for more

    code, out, err, _ = _ctrl_c_at_a_terminal(JUDGING, env, "waiting", judged, timeout=30)
    assert (code, out.strip(), err) == (130, "interrupted", "")


SLEEPING = textwrap.dedent("""
    import signal, sys, time
    from nmt import stoppable

    signal.signal(signal.SIGINT, signal.default_int_handler)  # as at a terminal (see SPIN)
    print("started", flush=True)
    try:  # Python in the child this time: a signal there would be acted on at once
        stoppable.call(time.sleep, 60, what="sleeping")
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(130)
""")


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads child processes from /proc")
def test_ctrl_c_at_a_terminal_stops_a_native_call_without_a_word_from_its_child() -> None:
    """Ctrl-C to the whole process group, as a terminal sends it: the child of
    :func:`nmt.stoppable.call` gets it too, leaves it to its parent, and is killed by it (before,
    it died of it on its own, with a traceback printed)."""

    def asleep(proc: subprocess.Popen[str]) -> list[int]:
        deadline = time.monotonic() + 20
        while not _descendants(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        children = _descendants(proc.pid)
        time.sleep(0.5)  # the child asleep in Python
        return children

    code, out, err, children = _ctrl_c_at_a_terminal(
        SLEEPING, {**os.environ, "PYTHONPATH": str(ROOT)}, "started", asleep, timeout=10)
    assert (code, out.strip(), err) == (130, "interrupted", "")
    _assert_gone(children)
