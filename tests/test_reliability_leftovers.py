"""What a killed writer leaves is removed by the next writer of its kind, never what a live
writer is writing: every temporary file or folder nmt writes is held by an ``flock`` while it
exists (:class:`nmt.files.Temporary`), which the system lets go when its writer dies."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from nmt.data.download import PART_PREFIX, ensure_corpus
from nmt.export.ct2_directory import replace_dir
from nmt.files import Temporary, atomic_write_text
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
