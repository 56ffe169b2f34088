"""Every file of a data cache and of a run replaced by what it must never be taken for: a FIFO
(which would block an open or a read for ever), a directory, a device, a symbolic link out of
its folder, a truncated copy, a copy with one byte flipped. The files are found by listing a
real cache and a real run, and what each command opens by watching it on an intact one, so a
new kind of file is covered without a word here. Every command must end within seconds (a
deadline turns a hang into a failure) with one ``error:`` line naming the file, or, for the
data cache, which is derived from the corpus, with a rebuild said in one line."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import Hung, deadline, invoke
from test_decode import make_run

from nmt.config import DataConfig
from nmt.data.cache import CACHE_VERSION, load_cache
from nmt.data.prepare import prepare
from nmt.errors import DataError

HOSTILE = ("fifo", "directory", "device", "link out")  # never opened as the file
DAMAGED = ("truncated", "flipped")  # opened; their content found wrong where it is checked
KINDS = HOSTILE + DAMAGED
SECONDS = 20  # a command slower than this on a tiny cache or run is taken for a hang
DATA = ("--set", "data.vocab_size=64", "--set", "data.valid_frac=0.1", "--set",
        "data.test_frac=0.1")  # tiny_data_config on the command line


def spoil(path: Path, kind: str, outside: Path) -> None:
    """Put ``kind`` in place of the file ``path``."""
    data = path.read_bytes()
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
        (path / "inside").write_bytes(data)
    elif kind == "device":
        if os.geteuid() == 0:  # a character device node of its own (/dev/zero's numbers)
            os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 5))
        else:
            path.symlink_to("/dev/zero")
    elif kind == "link out":  # an intact copy, outside the folder
        copy = outside / f"{path.parent.name}-{path.name}"
        copy.write_bytes(data)
        path.symlink_to(copy)
    elif kind == "truncated":
        path.write_bytes(data[: len(data) // 2])
    else:  # one byte flipped in the middle: the same size
        flipped = bytearray(data)
        flipped[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(flipped))


def files_of(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


# --- the data cache ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def built_cache(tmp_path_factory: pytest.TempPathFactory, tiny_corpus_zip: Path,
                tiny_corpus_sha256: str) -> Path:
    """A data directory with the tiny corpus and its prepared cache (SentencePiece: every kind
    of file a cache holds), built once and copied by each test."""
    import zipfile

    data_dir = tmp_path_factory.mktemp("built") / "data"
    (data_dir / "fra-eng").mkdir(parents=True)
    with zipfile.ZipFile(tiny_corpus_zip) as z:
        for name in ("fra-eng/fra.txt", "fra-eng/_about.txt"):
            (data_dir / name).write_bytes(z.read(name))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NMT_CORPUS_SHA256", tiny_corpus_sha256)
        prepare(DataConfig(vocab_size=64, valid_frac=0.1, test_frac=0.1), data_dir,
                log=lambda s: None)
    return data_dir


def cache_copy(built_cache: Path, tiny_data_dir: Path) -> Path:
    """The built cache copied into the test's data directory; its folder."""
    shutil.copytree(built_cache / "cache", tiny_data_dir / "cache")
    (cache,) = (tiny_data_dir / "cache").iterdir()
    return cache


def test_the_cache_holds_every_kind_of_file(built_cache: Path) -> None:
    """The listing the tests below go over: a SentencePiece cache's 25 files."""
    (cache,) = (built_cache / "cache").iterdir()
    names = {p.name for p in files_of(cache)}
    assert {"meta.json", "tokenizer.json", "spm.model", "rejected.tsv", "train.tgt_ids.npy",
            "test.ref.txt"} <= names and len(names) == 25


@pytest.mark.parametrize("kind", KINDS)
def test_every_cache_file_spoiled_is_refused_naming_it(
        kind: str, built_cache: Path, tmp_path: Path) -> None:
    """Each file of the cache in turn, spoiled: reading the cache ends at once with a
    DataError naming that file (which ``prepare`` answers with a rebuild), never a hang, a
    crash or a cache taken as sound."""
    (original,) = (built_cache / "cache").iterdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    failures = []
    for n, file in enumerate(files_of(original)):
        cache = tmp_path / f"c{n}" / original.name
        shutil.copytree(original, cache)
        spoil(cache / file.name, kind, outside)
        try:
            with deadline(SECONDS):
                load_cache(cache)
            failures.append(f"{file.name}: loaded")
        except DataError as e:
            if str(cache / file.name) not in str(e):
                failures.append(f"{file.name}: {e}")
        except Hung as e:
            failures.append(f"{file.name}: {e}")
    assert not failures, failures


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("command", "name"), [("stats", "train.tgt_ids.npy"),
                                               ("prepare", "spm.model")])
def test_a_spoiled_cache_file_is_rebuilt_by_the_commands(
        command: str, name: str, kind: str, built_cache: Path, tiny_data_dir: Path,
        tmp_path: Path) -> None:
    """``nmt data stats`` and ``nmt data prepare`` rebuild a cache with a spoiled file: one
    line names the file, the command succeeds, and the cache holds the file again."""
    cache = cache_copy(built_cache, tiny_data_dir)
    spoil(cache / name, kind, tmp_path)
    with deadline(SECONDS):
        code, out, err = invoke("data", command, *DATA)
    assert code == 0, err
    notes = [line for line in err.splitlines() if "rebuilding" in line]  # notes: stderr
    assert len(notes) == 1 and str(cache / name) in notes[0], err
    assert stat.S_ISREG(os.lstat(cache / name).st_mode)
    load_cache(cache)


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_every_spoiled_cache_file_is_rebuilt_by_data_stats(
        kind: str, built_cache: Path, tiny_data_dir: Path, tmp_path: Path) -> None:
    """The test above for every file of the cache (a rebuild each: slow)."""
    (original,) = (built_cache / "cache").iterdir()
    for file in files_of(original):
        shutil.rmtree(tiny_data_dir / "cache", ignore_errors=True)
        cache = cache_copy(built_cache, tiny_data_dir)
        spoil(cache / file.name, kind, tmp_path)
        with deadline(SECONDS):
            code, out, err = invoke("data", "stats", *DATA)
        assert code == 0 and f"{cache / file.name}" in err and "rebuilding" in err, (file, err)
        load_cache(cache)


def test_a_cache_from_before_the_digests_is_rebuilt_in_one_line(
        built_cache: Path, tiny_data_dir: Path) -> None:
    """A cache written by an earlier nmt (no digests in meta.json: version 3) is rebuilt, and
    the note says why."""
    cache = cache_copy(built_cache, tiny_data_dir)
    meta = json.loads((cache / "meta.json").read_text())
    meta["version"] = 3
    del meta["files"], meta["digest"]
    (cache / "meta.json").write_text(json.dumps(meta))
    messages: list[str] = []
    prepare(DataConfig(vocab_size=64, valid_frac=0.1, test_frac=0.1), tiny_data_dir,
            log=messages.append)
    assert [m for m in messages if "rebuilding" in m] == [
        f"cache {cache} unreadable ({cache}/meta.json: cache version 3, expected "
        f"{CACHE_VERSION}); rebuilding"]
    assert "files" in json.loads((cache / "meta.json").read_text())


@pytest.mark.parametrize("edit", ["sed s/[a-z]/z/g test.ref.txt", "an id in range",
                                  "a flipped byte in spm.model"])
def test_damage_of_the_same_shape_is_found(edit: str, built_cache: Path,
                                           tiny_data_dir: Path) -> None:
    """Damage that keeps a file's shape (the same line count, ids within the vocabulary, a
    model SentencePiece still reads) loaded before the digests; now it is rebuilt."""
    import numpy as np

    cache = cache_copy(built_cache, tiny_data_dir)
    if edit.startswith("sed"):
        ref = cache / "test.ref.txt"
        ref.write_text("".join(
            "".join("z" if "a" <= c <= "z" else c for c in line) + "\n"
            for line in ref.read_text().splitlines()))
        name = "test.ref.txt"
    elif edit == "an id in range":
        name = "test.tgt_ids.npy"
        ids = np.load(cache / name)
        ids[0] = 4 if ids[0] != 4 else 5  # a piece, not a special token
        np.save(cache / name, ids)
    else:
        name = "spm.model"
        blob = bytearray((cache / name).read_bytes())
        blob[-3] ^= 0x01  # in the trailing normalizer spec: still a model SentencePiece reads
        (cache / name).write_bytes(bytes(blob))
    with pytest.raises(DataError, match=f"{name}: damaged"):
        load_cache(cache)
    messages: list[str] = []
    prepare(DataConfig(vocab_size=64, valid_frac=0.1, test_frac=0.1), tiny_data_dir,
            log=messages.append)
    assert any("rebuilding" in m and name in m for m in messages), messages
    load_cache(cache)


# --- a run ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run as training and scoring leave it: config, tokenizer, checkpoint, metrics, log,
    the data record and test scores."""
    run = make_run(tmp_path_factory.mktemp("runs") / "toy", trained=False)  # files, not skill
    (run / "metrics.jsonl").write_text('{"step": 100, "train_loss": 2.5}\n'
                                       '{"step": 200, "valid_loss": 2.0, "valid_bleu": 9.5}\n')
    (run / "train.log").write_text("2025-01-01 00:00:00 start: toy, device cpu, 1 process\n")
    (run / "scores.test.json").write_text('{"multi": {"bleu": 12.5}, "beam": 1}\n')
    (run / "corpus.json").write_text(  # as training writes it, where it was trained
        '{"corpus": {"form": "builtin", "corpus": "fra-eng", "sha256": "0", "source": "en", '
        '"target": "fr"}, "data_dir": "/nonexistent", "working_dir": "/"}\n')
    return run


def _run_commands(run: Path, inputs: Path) -> dict[str, tuple[str, ...]]:
    return {"translate": ("translate", "--run", str(run), "a b c"),
            "bleu": ("bleu", "--run", str(run), "--src", str(inputs / "src.txt"), "--ref",
                     str(inputs / "ref.txt")),
            "runs": ("runs", "--runs-dir", str(run.parent))}


_opened: list[str] | None = None  # the audit hook's record while a command is watched


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _opened is not None and event == "open" and isinstance(args[0], (str, bytes, Path)):
        _opened.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)  # once per process: hooks cannot be removed


def opened_by(args: tuple[str, ...], run: Path) -> set[str]:
    """The files of ``run`` (relative names) that ``nmt ARGS`` opens on the intact run."""
    global _opened
    _opened = []
    try:
        code, _, err = invoke(*args)
        seen = list(_opened)
    finally:
        _opened = None
    assert code == 0, err
    return {Path(p).resolve().relative_to(run.resolve()).as_posix() for p in seen
            if Path(p).resolve().is_relative_to(run.resolve()) and Path(p).is_file()}


@pytest.mark.parametrize("kind", KINDS)
def test_every_run_file_spoiled_ends_each_command_in_one_line(
        kind: str, run_dir: Path, tmp_path: Path) -> None:
    """Each file of the run in turn, spoiled, under ``nmt translate --run``, ``nmt bleu
    --run`` and ``nmt runs``. What a command opens (found by watching it on the intact run),
    replaced by a FIFO, a directory, a device or a link out, is refused: one ``error:`` line
    naming the file, or, for ``nmt runs``, which lists broken runs, a note naming it. A damaged
    copy ends the command too, in one line or a result, never a hang or a traceback."""
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "src.txt").write_text("a b c\nd e\n")
    (inputs / "ref.txt").write_text("a b c\nd e\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    intact = tmp_path / "intact" / run_dir.name
    shutil.copytree(run_dir, intact)
    commands = _run_commands(intact, inputs)
    reads = {name: opened_by(args, intact) for name, args in commands.items()}
    assert {"checkpoints/last.pt", "tokenizer/vocab.txt", "config.toml"} <= reads["translate"]
    failures: list[str] = []
    for n, file in enumerate(files_of(run_dir)):
        relative = file.relative_to(run_dir).as_posix()
        for name in commands:
            run = tmp_path / f"r{n}-{name}" / run_dir.name
            shutil.copytree(run_dir, run)
            spoil(run / relative, kind, outside)
            try:
                with deadline(SECONDS):
                    code, out, err = invoke(*_run_commands(run, inputs)[name])
            except Hung as e:
                failures.append(f"{name} with {relative}: {e}")
                continue
            problem = _judge(kind, relative in reads[name], name, run / relative, code, out,
                             err)
            if problem:
                failures.append(f"{name} with {relative}: {problem}")
    assert not failures, "\n".join(failures)


def _judge(kind: str, read: bool, name: str, path: Path, code: int, out: str,
           err: str) -> str | None:
    """What is wrong with how a command ended (None: nothing)."""
    if "Traceback" in err:
        return err
    lines = err.strip().splitlines()
    if code != 0 and not (len(lines) == 1 and lines[0].startswith("error: ")):
        return f"exit {code} with {err!r}"
    if kind in HOSTILE and read:
        named = str(path.relative_to(path.parent.parent)) if name == "runs" else str(path)
        if code == 0 and not (name == "runs" and path.name in out):
            return f"exit 0: {out[-200:]!r}"
        if code != 0 and named not in err and str(path) not in err:
            return f"does not name the file: {err.strip()}"
    return None

