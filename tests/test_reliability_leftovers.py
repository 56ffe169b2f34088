"""What a killed writer leaves is removed by the next writer of its kind, never what a live
writer is writing: every temporary file or folder nmt writes is held by an ``flock`` while it
exists (:class:`nmt.files.Temporary`), which the system lets go when its writer dies."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

from nmt.data.cache import building
from nmt.data.download import PART_PREFIX, ensure_corpus
from nmt.export.ct2_directory import replace_dir, temporary_export
from nmt.files import Temporary, atomic_text_output, atomic_write_text, release_held
from nmt.runs.portable import RUN_COPY, UnpackedCopy

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}

HOLD = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""


@contextmanager
def held_by_another_process(path: Path) -> Iterator[None]:
    """``path`` locked as a live writer holds its temporary, by another process."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "held\n"
        yield
    finally:
        proc.kill()
        proc.wait()


def plant(directory: Path, name: str, folder: bool) -> Path:
    path = directory / name
    if folder:
        path.mkdir(parents=True)
        (path / "spool.txt").write_text("half a corpus\n")
    else:
        path.write_bytes(b"half a file")
    return path


def _corpus(tmp_path: Path, n: int = 300) -> str:
    (tmp_path / "c").mkdir(exist_ok=True)
    (tmp_path / "c" / "t.en").write_text("".join(f"I see {i} dogs.\n" for i in range(n)))
    (tmp_path / "c" / "t.fr").write_text("".join(f"Je vois {i} chiens.\n" for i in range(n)))
    return str(tmp_path / "c" / "t")


def _write_a_file(tmp_path: Path) -> Path:
    atomic_write_text(tmp_path / "last.pt", "x")
    return tmp_path


def _extract_the_corpus(tmp_path: Path) -> Path:
    archive = tmp_path / "fra-eng.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("fra-eng/fra.txt", "Go.\tVa !\n")
    ensure_corpus(tmp_path / "data", str(archive), log=lambda m: None,
                  expected_sha256=hashlib.sha256(b"Go.\tVa !\n").hexdigest())
    return tmp_path / "data" / "fra-eng"


def _replace_an_export(tmp_path: Path) -> Path:
    (tmp_path / "out").mkdir(exist_ok=True)
    (tmp_path / "new").mkdir()
    replace_dir(tmp_path / "new", tmp_path / "out")
    return tmp_path


def _unpack_a_package(tmp_path: Path) -> Path:
    """The folder a package's run copy is unpacked into (made before any member is read)."""
    UnpackedCopy(tmp_path / "p.argosmodel", f"p/model/{RUN_COPY}").cleanup()
    return Path(tempfile.gettempdir())


# (where the leftovers lie, relative to tmp_path; their names, dead and live; folders?; the
# next writer of that kind, returning where it wrote)
KINDS: dict[str, tuple[str, str, str, bool, Callable[[Path], Path]]] = {
    "atomic write": ("", ".last.pt.k1ll3d.tmp", ".last.pt.l1ve.tmp", False, _write_a_file),
    "extraction part": ("data/fra-eng", f"{PART_PREFIX}k1ll3d", f"{PART_PREFIX}l1ve", False,
                        _extract_the_corpus),
    "export": ("", ".out.k1ll3d.tmp", ".out.old.l1ve.tmp", True, _replace_an_export),
    "unpacked package": ("tmp", "nmt-from-k1ll3d", "nmt-from-l1ve", True, _unpack_a_package),
}


@pytest.mark.parametrize("kind", KINDS)
def test_the_next_writer_removes_a_dead_writers_leftovers_not_a_live_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    where, dead_name, live_name, folder, writer = KINDS[kind]
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    directory = tmp_path / where
    directory.mkdir(parents=True, exist_ok=True)
    dead = plant(directory, dead_name, folder)
    live = plant(directory, live_name, folder)
    other = plant(directory, "kept.tmp", folder)  # not of this kind
    with held_by_another_process(live):
        writer(tmp_path)
    assert not dead.exists()
    assert live.exists() and other.exists()


KILLED = """
import os, sys, time
from pathlib import Path
from typing import Any
import nmt.data.prepare as prepare
from nmt.config import DataConfig

def stuck(*args, **kwargs):
    print("building", flush=True)
    time.sleep(600)

prepare.train_tokenizer = stuck
cfg = DataConfig(corpus=sys.argv[1], vocab_size=40, langid=False, split_seed=int(sys.argv[3]))
prepare.prepare(cfg, Path(sys.argv[2]), log=lambda m: None)
"""


def _building(corpus: str, data: Path, seed: int) -> subprocess.Popen[str]:
    """A preparation stopped in the middle of building its cache (its spool written)."""
    proc = subprocess.Popen([sys.executable, "-c", KILLED, corpus, str(data), str(seed)],
                            stdout=subprocess.PIPE, text=True, env=ENV)
    assert proc.stdout is not None and proc.stdout.readline() == "building\n"
    return proc


def test_folders_of_killed_preparations_are_removed_by_the_next_one(tmp_path: Path) -> None:
    """Real SIGKILLs in the middle of preparations (of this config and of another): each next
    preparation removes the folders they left, never that of a preparation still running."""
    from nmt.config import DataConfig
    from nmt.data.prepare import prepare

    spec, data = _corpus(tmp_path), tmp_path / "d"
    cache = data / "cache"

    def hidden() -> set[str]:
        return {p.name for p in cache.iterdir() if p.name.startswith(".")}

    dead: set[str] = set()
    for seed in (1, 1, 2):
        proc = _building(spec, data, seed)
        assert not dead & hidden()  # the killed one before it: removed when it started
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        dead = hidden()
        assert len(dead) == 1
    running = _building(spec, data, 3)
    try:
        live = hidden() - dead
        proc = _building(spec, data, 1)  # killed too: its folder is dead, the running one's not
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        dead = hidden() - live
        assert len(live) == 1 and len(dead) == 1
        prepare(DataConfig(corpus=spec, vocab_size=40, langid=False), data, log=lambda m: None)
        assert hidden() == live
        assert len([p for p in cache.iterdir() if not p.name.startswith(".")]) == 1
    finally:
        running.kill()
        running.wait()
    prepare(DataConfig(corpus=spec, vocab_size=40, langid=False), data, log=lambda m: None,
            rebuild=True)  # the rebuild's own folders (the new cache, the old one) go too
    assert hidden() == set()


def test_a_temporary_is_removed_at_its_end_unless_renamed_away(tmp_path: Path) -> None:
    with Temporary(tmp_path, ".x-") as folder:
        (folder / "f").write_text("y")
    assert list(tmp_path.iterdir()) == []
    with Temporary(tmp_path, ".x-") as folder:
        os.replace(folder, tmp_path / "kept")
        folder.mkdir()  # another folder at its name afterwards: not its to remove
    assert sorted(p.name for p in tmp_path.iterdir()) == [folder.name, "kept"]


@pytest.mark.parametrize("folder", [True, False])
def test_a_temporary_removed_before_its_writer_holds_it_is_made_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, folder: bool) -> None:
    """Another writer's clean-up may take a temporary made a moment ago, before its writer
    opened and locked it, for a dead writer's: the writer makes another (before: `cannot
    write (No such file or directory)`, seen with three preparations at once)."""
    from nmt import files

    made: list[str] = []
    real = tempfile.mkdtemp if folder else tempfile.mkstemp

    def taken_at_once(*args: Any, **kwargs: Any) -> Any:
        got = real(*args, **kwargs)
        path = got if folder else got[1]
        made.append(path)
        if len(made) == 1:  # the first is removed by "another writer" straight away
            (os.rmdir if folder else os.unlink)(path)
        return got

    monkeypatch.setattr(files.tempfile, "mkdtemp" if folder else "mkstemp", taken_at_once)
    held = files.Temporary(tmp_path, "x-", folder=folder)
    try:
        assert len(made) == 2 and held.path == Path(made[1]) and held.path.exists()
    finally:
        held.cleanup()



# A translating command's ending without the interpreter's teardown (nmt.fast_exit), stopped by
# a signal (argv[3]) raised at a moment (argv[2]) of opening its output
SIGNALLED = """
import os, signal, sys, tempfile
from pathlib import Path
from nmt import fast_exit, files, process
out, moment, signum = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
signal.signal(signal.SIGTERM, process.raise_terminated)
fast_exit.allow()

def stop():
    os.kill(os.getpid(), signum)

if moment == "made":  # the file on disk, its clean-up not yet registered
    real = tempfile.mkstemp
    def mkstemp(*args, **kwargs):
        got = real(*args, **kwargs)
        stop()
        return got
    tempfile.mkstemp = mkstemp
try:
    output = files.atomic_text_output(out)
    output.__enter__()  # opened, its exit not yet anyone's (as inside ExitStack.enter_context)
    stop()
except (KeyboardInterrupt, process.Terminated):
    fast_exit.end(128 + signum)
sys.exit(3)
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("moment", ["made", "opened"])
def test_a_signal_as_an_output_is_opened_leaves_no_temporary_file(
        tmp_path: Path, moment: str, signum: int) -> None:
    """Ctrl-C or SIGTERM the moment `nmt translate -o out/fr.txt` has made `.fr.txt.XXXX.tmp`:
    before its clean-up was registered (the signal is held back until it is) or before the
    caller's `with` held it (nmt.fast_exit.end removes what is still held, as the interpreter's
    exit would). Before, the command ended with the temporary file left, one CI run in many."""
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.run([sys.executable, "-c", SIGNALLED, str(out / "fr.txt"), moment,
                           str(int(signum))], env=ENV, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 128 + signum, proc.stderr
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("folder", [True, False])
def test_a_temporary_that_cannot_be_held_is_not_left(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, folder: bool) -> None:
    """Made, but its opening to hold it fails (no read permission, too many open files): an
    OSError for the caller to name, and nothing left that no lock would ever mark as dead."""
    from nmt import files

    real = os.open

    def refused(path: Any, flags: int, *args: Any) -> int:
        if flags == os.O_RDONLY and Path(path).name.startswith("x-"):
            raise PermissionError(13, "Permission denied")
        return real(path, flags, *args)

    monkeypatch.setattr(files.os, "open", refused)
    with pytest.raises(PermissionError):
        files.Temporary(tmp_path, "x-", folder=folder)
    assert list(tmp_path.iterdir()) == []


class _Stopped(BaseException):
    """What the test's SIGTERM handler raises: as nmt's Terminated, or Ctrl-C's interruption."""


def _stop(signum: int, frame: object) -> None:
    raise _Stopped


def _run_signalled_at(n: int, write: Callable[[], object]) -> tuple[bool, bool]:
    """Run ``write()`` with SIGTERM sent to this process at its ``n``-th call or return (of
    Python or C code: every moment between two steps of it): whether the signal was sent (the
    write has fewer than ``n`` such moments when not), and whether it stopped the write."""
    events, sent = 0, False

    def count(frame: object, event: str, arg: object) -> None:
        nonlocal events, sent
        events += 1
        if events == n:
            sent = True
            os.kill(os.getpid(), signal.SIGTERM)

    old = signal.signal(signal.SIGTERM, _stop)
    try:
        try:
            sys.setprofile(count)
            write()
        finally:
            sys.setprofile(None)
        return sent, False
    except _Stopped:
        return sent, True
    finally:  # the write left the handlers as they were
        assert signal.signal(signal.SIGTERM, old) is _stop, f"signalled at {n}"
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, f"signalled at {n}"


def _write_text(target: Path) -> None:
    atomic_write_text(target, "new")


def _stream_text(target: Path) -> None:
    with atomic_text_output(target) as f:
        f.write("new")


def _stream_text_on_a_stack(target: Path) -> None:  # as nmt translate opens its --output
    with ExitStack() as stack:
        stack.enter_context(atomic_text_output(target)).write("new")


def _replace_folder(target: Path) -> None:  # as nmt export puts a new export in place
    with temporary_export(target) as new:
        (new / "model.bin").write_text("new")
        replace_dir(new, target)


def _rebuild_cache(target: Path) -> None:  # as nmt data prepare --rebuild replaces a cache
    with building(target) as new:
        (new / "model.bin").write_text("new")


# a signal that comes while Python runs a weakref callback (the WeakSet of held temporaries')
# is reported as unraisable and dropped by Python itself: that run then writes to its end
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("write", [_write_text, _stream_text, _stream_text_on_a_stack,
                                   _replace_folder, _rebuild_cache],
                         ids=lambda f: f.__name__.strip("_"))
def test_a_signal_at_any_moment_of_a_write_leaves_the_old_or_the_new(
        tmp_path: Path, write: Callable[[Path], None]) -> None:
    """SIGTERM (or Ctrl-C) at every moment of a write, one run each: what is at the path is the
    old content or the new, whole, and once what a command's end cleans up is cleaned up
    (nmt.fast_exit.end: the temporaries still held) nothing else is left beside it. Before,
    the temporary file was left at a few moments, an old export or data cache moved aside was
    lost with the new one not yet in its place, and a signal in the middle of a clean-up could
    come out as `cannot write (Bad file descriptor)`."""
    folder = write in (_replace_folder, _rebuild_cache)
    target = tmp_path / ("export" if folder else "out.txt")
    written = (target / "model.bin") if folder else target
    write(target)  # once through: what is cached on first use (a glob's pattern) is, from here
    for n in range(1, 20_000):
        if folder:
            shutil.rmtree(target, ignore_errors=True)
        written.parent.mkdir(exist_ok=True)
        written.write_text("old")
        sent, stopped = _run_signalled_at(n, lambda: write(target))
        release_held()
        assert [p.name for p in tmp_path.iterdir()] == [target.name], f"signalled at {n}"
        assert written.read_text() in ("old", "new") if stopped else written.read_text() == "new"
        if not sent:
            break
    else:
        raise AssertionError("the write never ran to its end")


def test_held_signals_raise_each_signal_once_and_put_every_handler_back() -> None:
    """SIGTERM at every moment of `held_signals.held()` around a step, one run each: the signal
    is raised once (never lost, never inside the step), and both handlers are as they were."""
    from nmt import held_signals

    for n in range(1, 5_000):
        inside: list[int] = []

        def step(inside: list[int] = inside) -> None:
            with held_signals.held():
                inside.append(1)
                inside.append(2)  # a step after the signal may have come

        sent, stopped = _run_signalled_at(n, step)
        assert stopped == sent, f"signalled at {n}"
        assert inside in ([], [1, 2]), f"signalled at {n}"
        if not sent:
            break
    else:
        raise AssertionError("the block never ran to its end")


def _old_run(run: Path) -> dict[str, str]:
    """A run in brief (what --overwrite moves aside): its files and what each holds."""
    for name in ("checkpoints/last.pt", "config.toml"):
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        (run / name).write_text("old")
    return _contents(run)


def _contents(run: Path) -> dict[str, str]:
    return {str(p.relative_to(run)): p.read_text() if p.is_file() else "dir"
            for p in sorted(run.rglob("*"))}


def _overwrite_start(run: Path, saves: bool) -> None:
    """As `nmt train --overwrite` starts over a run, then saves its first checkpoint (or fails
    before it)."""
    from nmt.errors import NmtError
    from nmt.runs.directory import discard_previous_run, previous_run_kept, start_run_dir

    with suppress(NmtError), previous_run_kept(run, overwrite=True):
        start_run_dir(run, resume=False, overwrite=True)
        atomic_write_text(run / "config.toml", "new")
        if not saves:
            raise NmtError("the new run's start failed")
        (run / "checkpoints").mkdir()
        atomic_write_text(run / "checkpoints" / "last.pt", "new")
        discard_previous_run(run)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("saves", [True, False], ids=["saves", "fails"])
def test_a_signal_at_any_moment_of_an_overwrite_leaves_the_old_run_or_the_new(
        tmp_path: Path, saves: bool) -> None:
    """SIGTERM (or Ctrl-C) at every moment of an --overwrite's start, one run each: the run
    directory holds the old run, whole, or the new one with its checkpoint; or, where the
    signal came as the start ended (a SIGKILL anywhere leaves the same), the old run whole in
    .previous-run, which the next --overwrite start puts back if it fails too. A start that
    fails always leaves the old run."""
    run = tmp_path / "r"
    new = {"checkpoints": "dir", "checkpoints/last.pt": "new", "config.toml": "new"}
    for n in range(1, 50_000):
        shutil.rmtree(run, ignore_errors=True)
        old = _old_run(run)
        aside = {f".previous-run/{k}": v for k, v in old.items()} | {".previous-run": "dir"}
        sent, stopped = _run_signalled_at(n, lambda: _overwrite_start(run, saves))
        release_held()
        now = _contents(run)
        if now not in (old, new):
            assert aside.items() <= now.items(), f"signalled at {n}: {now}"
            assert all(k.startswith(".previous-run") or now.get(k, "") in ("new", "dir")
                       for k in now), f"signalled at {n}: {now}"
            _overwrite_start(run, saves=False)  # what the next start finds
            now = _contents(run)
        assert now in ((old, new) if saves and stopped else (new,) if saves else (old,)), (
            f"signalled at {n}")
        if not sent:
            break
    else:
        raise AssertionError("the start never ran to its end")
