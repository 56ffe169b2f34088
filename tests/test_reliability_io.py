"""Where results go and what happens when they cannot: `nmt bleu --src` beside split results,
`translate --output` naming its input, full disks behind files and stdout, unreadable or
misplaced corpus files, the umask, huge integers on the command line."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from conftest import invoke
from test_decode import make_run

import nmt.data.cache
import nmt.data.download as dl
from nmt.config import DataConfig
from nmt.data.download import ensure_corpus
from nmt.data.prepare import prepare
from nmt.errors import DataError, NmtError

ROOT = Path(__file__).resolve().parent.parent
HAS_DEV_FULL = os.path.exists("/dev/full")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("runs") / "toy")


def _one_line(code: int, err: str) -> str:
    assert code != 0 and err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


# --- nmt bleu --src never lands on split results -------------------------------------------------


def test_bleu_on_a_file_named_test_keeps_the_split_results(run_dir: Path,
                                                           tmp_path: Path) -> None:
    from nmt.runs.table import run_info

    split_scores = {"multi": {"bleu": 12.5}, "beam": 1}
    (run_dir / "scores.test.json").write_text(json.dumps(split_scores))
    (run_dir / "hyp.test.txt").write_text("the split's hypotheses\n")
    src, ref = tmp_path / "test", tmp_path / "test.fr"
    src.write_text("i see the dog .\n")
    ref.write_text("je vois le chien .\n")
    code, out, err = invoke("bleu", "--run", str(run_dir), "--src", str(src), "--ref", str(ref),
                            "--json")
    assert code == 0, err
    report = json.loads(out)
    assert Path(report["hypotheses"]).name == "hyp.file-test.txt"
    assert Path(report["scores"]).name == "scores.file-test.json"
    assert json.loads((run_dir / "scores.test.json").read_text()) == split_scores
    assert (run_dir / "hyp.test.txt").read_text() == "the split's hypotheses\n"
    assert run_info(run_dir).test_bleu == 12.5  # `nmt runs` still shows the split's score


# --- translate --output FILE never replaces its own input ---------------------------------------


@pytest.mark.parametrize("how", ["same path", "other spelling", "symbolic link", "hard link",
                                 "stdin"])
def test_translate_output_that_is_the_input_is_refused(run_dir: Path, tmp_path: Path,
                                                       how: str) -> None:
    text = "i see the dog .\nthe cat .\n"
    source = tmp_path / "in.txt"
    source.write_text(text)
    output = {"same path": source, "other spelling": tmp_path / "." / "in.txt",
              "symbolic link": tmp_path / "link.txt", "hard link": tmp_path / "hard.txt",
              "stdin": source}[how]
    if how == "symbolic link":
        output.symlink_to(source)
    elif how == "hard link":
        os.link(source, output)
    args = ["translate", "--run", str(run_dir), "--device", "cpu", "--output", str(output)]
    if how == "stdin":  # `nmt translate -o in.txt < in.txt`: a real process, stdin is the file
        env = dict(os.environ, OMP_NUM_THREADS="1", COLUMNS="500",
                   PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        with source.open("rb") as stdin:
            proc = subprocess.run([sys.executable, "-m", "nmt", *args], stdin=stdin,
                                  capture_output=True, text=True, env=env, cwd=ROOT)
        code, err = proc.returncode, proc.stderr
        source_name = "stdin"
    else:
        code, _, err = invoke(*args, "--input", str(source))
        source_name = f"--input {source}"
    line = _one_line(code, err)
    assert f"--output {output}: is the same file as {source_name}" in line
    assert source.read_text() == text


def test_translate_to_another_file_still_works(run_dir: Path, tmp_path: Path) -> None:
    """The control: distinct input and output (an existing output is replaced)."""
    source, output = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("i see the dog .\n")
    output.write_text("old\n")
    code, _, err = invoke("translate", "--run", str(run_dir), "--device", "cpu",
                          "--input", str(source), "--output", str(output))
    assert code == 0, err
    assert output.read_text().count("\n") == 1 and output.read_text() != "old\n"


# --- full disks behind files and stdout ---------------------------------------------------------


def _nmt(*args: str, stdout: Any) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", COLUMNS="500",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "nmt", *args], stdout=stdout,
                          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=env,
                          cwd=ROOT, timeout=120)


@pytest.mark.skipif(not HAS_DEV_FULL, reason="needs /dev/full")
def test_translate_output_to_a_full_device_is_one_line(run_dir: Path) -> None:
    code, _, err = invoke("translate", "--run", str(run_dir), "--device", "cpu",
                          "--output", "/dev/full", "i see the dog .")
    assert _one_line(code, err) == ("error: --output /dev/full: cannot write (No space left on "
                                    "device)")


@pytest.mark.skipif(not HAS_DEV_FULL, reason="needs /dev/full")
@pytest.mark.parametrize("command", ["translate", "bleu --json", "bleu --examples"])
def test_stdout_on_a_full_device_is_one_line(run_dir: Path, command: str) -> None:
    """`nmt translate ... > /dev/full`, `nmt bleu --json > /dev/full`: real processes, as a
    shell runs them."""
    args = {"translate": ["translate", "i see the dog ."],
            "bleu --json": ["bleu", "--examples", "--json"],
            "bleu --examples": ["bleu", "--examples"]}[command]
    with open("/dev/full", "w") as full:
        proc = _nmt(*args, "--run", str(run_dir), "--device", "cpu", stdout=full)
    assert proc.returncode == 1
    assert proc.stderr == "error: standard output: cannot write (No space left on device)\n"


def test_attention_picture_on_a_full_disk_leaves_no_empty_file(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import nmt.files as files

    picture = tmp_path / "a.png"
    real_fdopen = os.fdopen

    def full_disk(fd: int, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        f = real_fdopen(fd, mode, *args, **kwargs)
        if "w" in mode:
            def write(data: Any) -> int:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            f.write = write  # type: ignore[method-assign]
        return f

    monkeypatch.setattr(files.os, "fdopen", full_disk)
    code, _, err = invoke("attention", "i see the dog .", "--run", str(run_dir),
                          "--device", "cpu", "--output", str(picture))
    assert _one_line(code, err).endswith(f"--output {picture}: cannot write (No space left on "
                                         "device); the previous file, if any, is unchanged")
    assert list(tmp_path.iterdir()) == []  # no 0-byte picture, no temporary file


def test_full_disk_while_writing_the_prepared_cache(
    tiny_data_dir: Path, tiny_data_config: DataConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(nmt.data.cache.NpyWriter, "append", full)
    with pytest.raises(NmtError) as e:
        prepare(tiny_data_config, tiny_data_dir, log=lambda s: None)
    assert str(e.value).endswith(": cannot write (No space left on device)")
    assert str(e.value).startswith(f"{tiny_data_dir}/cache/")
    assert not (tiny_data_dir / "cache").exists()  # no partial cache left, nor its folder


# --- the corpus: unreadable, misplaced, shared ---------------------------------------------------


TEXT = ("Go.\tVa !\n" * 50).encode()
DIGEST = hashlib.sha256(TEXT).hexdigest()


def _zip(path: Path) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("fra-eng/fra.txt", TEXT)
    return path


def test_data_dir_that_is_a_file_is_one_line(tmp_path: Path, no_network: None) -> None:
    archive = _zip(tmp_path / "fra-eng.zip")
    blocker = tmp_path / "data"
    blocker.write_text("a file")
    code, _, err = invoke("data", "download", "--data-dir", str(blocker), "--source",
                          str(archive))
    assert _one_line(code, err) == (f"error: --data-dir {blocker}: expected a directory, but a "
                                    "file of that name is in the way")


def _refuse_reading(monkeypatch: pytest.MonkeyPatch, victim: Path) -> None:
    """Opening ``victim`` fails as for a file without read permission (injected: as root,
    chmod does not stop reads)."""
    real = Path.open

    def path_open(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self == victim:
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real(self, *args, **kwargs)

    real_builtin = open

    def builtin_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        if Path(file) == victim:
            raise PermissionError(errno.EACCES, "Permission denied", str(file))
        return real_builtin(file, *args, **kwargs)

    monkeypatch.setattr(Path, "open", path_open)
    monkeypatch.setattr(dl, "open", builtin_open, raising=False)


def test_unreadable_mirror_zip_is_not_called_something_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_network: None
) -> None:
    archive = _zip(tmp_path / "fra-eng.zip")
    _refuse_reading(monkeypatch, archive)
    with pytest.raises(DataError) as e:
        ensure_corpus(tmp_path / "data", str(archive), expected_sha256=DIGEST, log=lambda s: None)
    assert str(e.value) == f"{archive}: cannot read (Permission denied)"


def test_unreadable_corpus_text_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_network: None
) -> None:
    data = tmp_path / "data"
    ensure_corpus(data, str(_zip(tmp_path / "fra-eng.zip")), expected_sha256=DIGEST,
                  log=lambda s: None)
    text = data / "fra-eng" / "fra.txt"
    _refuse_reading(monkeypatch, text)
    with pytest.raises(DataError) as e:
        ensure_corpus(data, expected_sha256=DIGEST, log=lambda s: None)
    assert str(e.value) == f"{text}: cannot read (Permission denied)"


def test_corpus_and_cache_follow_the_umask(tiny_corpus_zip: Path, tiny_corpus_sha256: str,
                                           tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           tiny_data_config: DataConfig) -> None:
    """A data directory shared by a group (umask 002) gets group-writable files and
    directories, like any other tool's (before: 0600 and 0700)."""
    monkeypatch.setenv("NMT_CORPUS_SHA256", tiny_corpus_sha256)
    old = os.umask(0o002)
    try:
        data = tmp_path / "data"
        prepared = prepare(tiny_data_config, data, source=str(tiny_corpus_zip),
                           log=lambda s: None)
    finally:
        os.umask(old)
    assert (data / "fra-eng" / "fra.txt").stat().st_mode & 0o777 == 0o664
    assert prepared.cache_dir.stat().st_mode & 0o777 == 0o775


def test_parts_left_by_a_killed_extraction_are_removed(tmp_path: Path,
                                                       no_network: None) -> None:
    from test_reliability_leftovers import held_by_another_process

    data = tmp_path / "data"
    (data / "fra-eng").mkdir(parents=True)
    stale = data / "fra-eng" / ".part-abc123"  # no writer holds it
    stale.write_bytes(b"x" * 1000)
    fresh = data / "fra-eng" / ".part-now"  # another process extracting right now: kept
    fresh.write_bytes(b"y")
    with held_by_another_process(fresh):
        ensure_corpus(data, str(_zip(tmp_path / "fra-eng.zip")), expected_sha256=DIGEST,
                      log=lambda s: None)
    assert not stale.exists() and fresh.exists()


# --- huge integers ------------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "needle"), [
    (["--set", "train.seed=18446744073709551616"],
     "train.seed: expected at most 4294967295, got 18446744073709551616"),
    (["--set", "data.truncate=9223372036854775808"],
     "data.truncate: expected at most 2147483647, got 9223372036854775808"),
    (["--set", "train.max_steps=99999999999999999999999"], "train.max_steps: expected at most"),
])
def test_huge_integers_in_train_are_refused_before_a_run_directory_exists(
    tmp_path: Path, args: list[str], needle: str
) -> None:
    runs = tmp_path / "runs"
    code, _, err = invoke("train", "--config", "configs/demo.toml", "--runs-dir", str(runs),
                          *args)
    assert code == 2 and needle in _one_line(code, err)
    assert not runs.exists()


@pytest.mark.parametrize("option", [["--beam", "1000000000"], ["--batch-size", "10000000000"],
                                    ["--max-src-tokens", "99999999999999999999"]])
def test_huge_integer_options_are_refused_when_parsed(run_dir: Path, option: list[str]) -> None:
    code, _, err = invoke("translate", "--run", str(run_dir), "--device", "cpu", *option, "go .")
    assert code == 2 and "Traceback" not in err
    assert f"Invalid value for '{option[0]}'" in err


def test_replaced_files_keep_their_mode_and_new_ones_follow_the_umask(tmp_path: Path) -> None:
    """Atomic writes go through mkstemp (0600); the result is what `open(path, "w")` gives."""
    from nmt.files import atomic_write_text

    kept = tmp_path / "kept.txt"
    kept.write_text("old")
    kept.chmod(0o640)
    atomic_write_text(kept, "new")
    old = os.umask(0o027)
    try:
        atomic_write_text(tmp_path / "new.txt", "new")
    finally:
        os.umask(old)
    assert kept.stat().st_mode & 0o777 == 0o640 and kept.read_text() == "new"
    assert (tmp_path / "new.txt").stat().st_mode & 0o777 == 0o640
