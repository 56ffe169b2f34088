"""``nmt train --from`` an Argos package, an export or a run that someone else made: only the
files a run copy holds are unpacked, each within the bound the others set, whatever the package
declares or deflates to; a package's errors name the package and its member (not the temporary
folder it was unpacked into), a tokenizer that does not fit the checkpoint is refused before any
data is prepared, and a path that is none of what ``--from`` takes says what it is.

The packages are crafted with ``zipfile`` from a toy run copy (no training, no CTranslate2);
members of zeros stand for gigabytes at a bound lowered for the test, or are declared huge in
their headers."""

from __future__ import annotations

import json
import os
import struct
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import invoke
from test_data_tokenizers import SRC, TGT
from test_decode import make_run

import nmt.runs.portable as portable
from nmt.data.tokenizers import FILES, SentencePieceTokenizer, Tokenizer, WordTokenizer
from nmt.errors import CheckpointError
from nmt.runs.checkpoint import load_checkpoint, save_checkpoint, vocab_entry
from nmt.runs.loading import run_tokenizer
from nmt.training.finetune import open_parent

TOP = "nmt-en_fr-toy"
COPY = f"{TOP}/model/{portable.RUN_COPY}"
MEMBERS = ["config.toml", "corpus.json", "parent.json", "tokenizer/tokenizer.json",
           "tokenizer/vocab.txt", portable.CHECKPOINT, f"../{portable.META_FILE}"]


def one_line_error(code: int, err: str) -> str:
    """The CLI failed with exactly one ``error:`` line and no traceback; returns it."""
    assert code != 0 and "Traceback" not in err, err
    assert err.strip().count("\n") == 0 and err.startswith("error: "), err
    return err.strip()


@pytest.fixture()
def run_copy(tmp_path: Path) -> Path:
    """A run copy as ``nmt export --with-checkpoint`` writes it: a config, a word tokenizer, the
    records and ``checkpoints/best.pt`` (whose vocabulary records the tokenizer's digest)."""
    run = make_run(tmp_path / "toy", trained=False)
    payload = load_checkpoint(run / "checkpoints" / "last.pt")
    save_checkpoint(run / portable.CHECKPOINT, {**payload, "vocab": vocab_entry(
        run_tokenizer(run))})
    (run / "checkpoints" / "last.pt").unlink()
    (run / "corpus.json").write_text(  # as an export writes it: no folder of the machine
        '{"corpus": {"form": "builtin", "corpus": "fra-eng", "sha256": "0", "source": "en", '
        '"target": "fr"}}\n')
    (run / "parent.json").write_text('{"run": "grandparent"}\n')
    return run


def member_path(name: str) -> str:
    """A run copy's file ``name`` as a member of the package (``../X``: beside the copy)."""
    return f"{TOP}/model/{name[3:]}" if name.startswith("../") else f"{COPY}/{name}"


def write_zeros(z: zipfile.ZipFile, name: str, size: int) -> None:
    with z.open(name, "w", force_zip64=True) as f:
        for start in range(0, size, 2**20):
            f.write(bytes(min(2**20, size - start)))


def package(copy: Path, path: Path, zeros: dict[str, int] | None = None,
            extra: dict[str, bytes] | None = None) -> Path:
    """``copy`` as an ``.argosmodel`` would hold it under ``TOP/model/``, beside a CTranslate2
    model and the export's metadata; ``zeros``: files replaced by that many zero bytes
    (deflated); ``extra``: other members."""
    zeros = zeros or {}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        z.writestr(f"{TOP}/metadata.json", "{}")
        z.writestr(f"{TOP}/model/model.bin", b"not a model")
        if f"../{portable.META_FILE}" not in zeros:
            z.writestr(member_path(f"../{portable.META_FILE}"), json.dumps({"run": "toy"}))
        for file in sorted(p for p in copy.rglob("*") if p.is_file()):
            name = file.relative_to(copy).as_posix()
            if name not in zeros:
                z.write(file, member_path(name))
        for name, size in zeros.items():
            write_zeros(z, member_path(name), size)
        for name, data in (extra or {}).items():
            z.writestr(name, data)
    return path


@pytest.fixture()
def opened(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The names of the members read from any zip archive."""
    names: list[str] = []
    real = zipfile.ZipFile.open

    def spy(self: zipfile.ZipFile, name: Any, *args: Any, **kwargs: Any) -> Any:
        names.append(name if isinstance(name, str) else name.filename)
        return real(self, name, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "open", spy)
    yield names


@pytest.fixture()
def own_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary folder packages are unpacked into, watched by the test."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(folder))
    return folder


def bounds(copy: Path) -> dict[str, int]:
    """The bound of each member of :data:`MEMBERS`, as ``nmt train --from`` applies them."""
    return {name: portable.checkpoint_bound(copy) if name == portable.CHECKPOINT else
            portable.RECORD_BYTES if name.startswith("../") else portable.file_bound(name) or 0
            for name in MEMBERS}


def test_the_bounds_fit_what_a_run_copy_holds(run_copy: Path, tmp_path: Path) -> None:
    """Every file a saved tokenizer writes is one a package may unpack; a genuine copy is within
    every bound (the checkpoint's with room to spare) and anything else is no file of it."""
    word = run_tokenizer(run_copy)
    assert isinstance(word, WordTokenizer)
    tokenizers: list[Tokenizer] = [word, WordTokenizer(word.src_itos, word.tgt_itos[:-1])]
    tokenizers += [SentencePieceTokenizer.train(SRC, TGT, vocab_size=40, model_type="unigram",
                                                joint=joint) for joint in (True, False)]
    for i, tokenizer in enumerate(tokenizers):
        tokenizer.save(tmp_path / str(i))
        written = {p.name for p in (tmp_path / str(i)).iterdir()}
        assert written <= set(FILES) and len(written) == (2 if tokenizer.joint else 3)
        assert all(portable.file_bound(f"tokenizer/{name}") for name in written)
    portable.check_sizes(run_copy, run_copy / portable.CHECKPOINT)
    size = (run_copy / portable.CHECKPOINT).stat().st_size
    assert size < portable.checkpoint_bound(run_copy) - portable.CHECKPOINT_MARGIN
    assert portable.checkpoint_bound(run_copy) < portable.CHECKPOINT_MARGIN + 4 * size
    for name in ("junk.bin", "tokenizer/extra.model", "checkpoints/last.pt", "sub/config.toml",
                 "../config.toml", "tokenizer", "checkpoints"):
        assert portable.file_bound(name) is None


def test_only_the_files_of_a_run_copy_are_unpacked(run_copy: Path, tmp_path: Path,
                                                   opened: list[str]) -> None:
    """Members beside the run copy's files, in its folder or elsewhere, climbing out of it or
    named like its files in another folder, are never read, however large they deflate to."""
    extra = {f"{COPY}/junk.bin": b"x", f"{COPY}/tokenizer/extra.model": b"x",
             f"{COPY}/checkpoints/last.pt": b"x", f"{COPY}/sub/config.toml": b"x",
             f"{COPY}/../../../../evil.txt": b"x", f"/{COPY}/config.toml": b"x",
             f"{TOP}/README.md": b"x", "other/model/nmt-run/config.toml": b"x"}
    pkg = package(run_copy, tmp_path / "p.argosmodel", zeros={}, extra=extra)
    with zipfile.ZipFile(pkg, "a", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        write_zeros(z, f"{COPY}/zeros.bin", 64 * 2**20)  # a gigabyte at a real package's scale
    opened.clear()
    parent = open_parent(pkg)
    unpacked = sorted(p.relative_to(parent.run_dir).as_posix()
                      for p in parent.run_dir.rglob("*") if p.is_file())
    assert unpacked == sorted(p.relative_to(run_copy).as_posix()
                              for p in run_copy.rglob("*") if p.is_file())
    assert sorted(p.name for p in parent.run_dir.parent.iterdir()) == [
        portable.META_FILE, portable.RUN_COPY]
    assert parent.name == "toy" and parent.label == str(pkg)
    assert {name for name in opened if name.startswith(TOP)} == {member_path(name)
                                                                  for name in MEMBERS}
    assert not any(name in opened for name in [*extra, f"{COPY}/zeros.bin"])


@pytest.mark.parametrize("name", MEMBERS)
def test_a_member_that_deflates_beyond_its_bound_is_never_unpacked(
        run_copy: Path, tmp_path: Path, own_tmp: Path, opened: list[str],
        monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Each file of a run copy replaced by zeros one byte over its bound (bounds lowered so
    the test writes megabytes, not gigabytes): refused from its declared size, before a byte
    of it is read; the temporary folder is removed; nothing else is written."""
    monkeypatch.setattr(portable, "TOKENIZER_BYTES", 2**20)
    monkeypatch.setattr(portable, "CHECKPOINT_MARGIN", 2**20)
    bound = bounds(run_copy)[name]
    pkg = package(run_copy, tmp_path / "p.argosmodel", zeros={name: bound + 1})
    with zipfile.ZipFile(pkg) as z:
        assert z.getinfo(member_path(name)).compress_size < bound // 100
    opened.clear()
    code, _, err = invoke("train", "--from", str(pkg), "--runs-dir", str(tmp_path / "runs"),
                          "--data-dir", str(tmp_path / "data"))
    line = one_line_error(code, err)
    assert line.startswith(f"error: --from {pkg}: {member_path(name)} unpacks to "
                           f"{bound + 1:,} bytes, more than the {bound:,} bytes ")
    assert member_path(name) not in opened
    assert list(own_tmp.iterdir()) == []
    assert not (tmp_path / "runs").exists() and not (tmp_path / "data").exists()


def _declare_size(path: Path, member: str, size: int) -> None:
    """Rewrite the uncompressed size ``member``'s headers declare (it was written without
    zip64 extras, so both are the 32-bit fields)."""
    data = bytearray(path.read_bytes())
    encoded = member.encode()
    for signature, size_at, name_at in ((b"PK\x03\x04", 22, 30), (b"PK\x01\x02", 24, 46)):
        start = data.find(signature)
        while data[start + name_at: start + name_at + len(encoded)] != encoded:
            start = data.find(signature, start + 1)
            assert start >= 0
        data[start + size_at: start + size_at + 4] = struct.pack("<I", size)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("name", MEMBERS)
def test_a_member_whose_header_declares_gigabytes_is_never_unpacked(
        run_copy: Path, tmp_path: Path, own_tmp: Path, opened: list[str], name: str) -> None:
    """At the real bounds: each file of a run copy whose headers declare 4 GiB is refused from
    the declaration, before a byte of it is read."""
    pkg = package(run_copy, tmp_path / "p.argosmodel")
    huge = 3 * 2**30
    _declare_size(pkg, member_path(name), huge)
    opened.clear()
    with pytest.raises(CheckpointError) as e:
        open_parent(pkg)
    assert str(e.value).startswith(f"--from {pkg}: {member_path(name)} unpacks to {huge:,} "
                                   f"bytes, more than the {bounds(run_copy)[name]:,} bytes ")
    assert member_path(name) not in opened
    assert list(own_tmp.iterdir()) == []


def test_a_member_holding_more_than_its_header_says_is_read_no_further(
        run_copy: Path, tmp_path: Path, own_tmp: Path) -> None:
    """A header that understates the size: ``zipfile`` stops at the declared size, and the
    member then fails its CRC-32 check: one line, nothing left behind."""
    pkg = package(run_copy, tmp_path / "p.argosmodel", zeros={"config.toml": 2**20})
    _declare_size(pkg, member_path("config.toml"), 100)
    with pytest.raises(CheckpointError, match="cannot read the package: damaged .*CRC"):
        open_parent(pkg)
    assert list(own_tmp.iterdir()) == []


@pytest.mark.parametrize("name", [n for n in MEMBERS if not n.startswith("../")])
def test_a_file_of_a_run_or_export_beyond_its_bound_is_refused_before_it_is_read(
        run_copy: Path, tmp_path: Path, name: str) -> None:
    """The same bounds for a run copy on disk (an export directory, an unpacked package, a run):
    a (sparse) file one byte over its bound is refused from its size, before it is read (read,
    its zeros would be another error: TOML, JSON, a tokenizer or a zip archive)."""
    export = tmp_path / "export"
    run_copy.rename(export)
    path = export / name
    bound = bounds(export)[name]
    with path.open("ab") as f:
        f.truncate(bound + 1)
    code, _, err = invoke("train", "--from", str(export), "--runs-dir", str(tmp_path / "runs"))
    line = one_line_error(code, err)
    assert line.startswith(f"error: {path}: holds {bound + 1:,} bytes, more than the {bound:,} "
                           "bytes ")


# --- messages --------------------------------------------------------------------------------


def as_source(copy: Path, tmp_path: Path, kind: str) -> Path:
    """What ``--from`` is given holding ``copy``: the run itself, an export directory, or a
    package file."""
    if kind == "run":
        return copy
    if kind == "export":
        export = tmp_path / "export"
        export.mkdir()
        copy.rename(export / portable.RUN_COPY)
        (export / portable.META_FILE).write_text('{"run": "toy"}')
        return export
    return package(copy, tmp_path / "p.argosmodel")


def named(source: Path, kind: str, name: str) -> str:
    """How a message names the file ``name`` of the run copy in ``source``."""
    return {"run": f"{source}/{name}", "export": f"{source}/{portable.RUN_COPY}/{name}",
            "package": f"{source}: {COPY}/{name}"}[kind]


SOURCES = ["run", "export", "package"]


@pytest.mark.parametrize("kind", SOURCES)
@pytest.mark.parametrize("edit", ["[model]\nd_model = 32", "[data]\nmin_freq = 3"])
def test_a_config_that_is_not_its_checkpoints_names_the_file_given(
        run_copy: Path, tmp_path: Path, kind: str, edit: str) -> None:
    """A run copy whose ``config.toml`` describes another model or data than its checkpoint:
    one line naming the file as the user can find it (a package's member, not the temporary
    folder it was unpacked into), with advice that works for ``--from``."""
    config = run_copy / "config.toml"
    section, change = edit.split("\n")
    text = config.read_text()
    key = change.split(" = ")[0]
    text = "\n".join(f"{key} = {change.split(' = ')[1]}" if line.startswith(f"{key} =")
                     else line for line in text.splitlines())
    config.write_text(text + "\n")
    source = as_source(run_copy, tmp_path, kind)
    code, _, err = invoke("train", "--from", str(source), "--runs-dir", str(tmp_path / "runs"),
                          "--data-dir", str(tmp_path / "data"))
    line = one_line_error(code, err)
    advice = ("restore the config.toml it was trained with" if kind == "run" else
              "export the run again with nmt export --with-checkpoint")
    assert line.startswith(f"error: {named(source, kind, 'config.toml')}: {section} cannot "
                           f"change after training ({section[1:-1]}.{key} is ")
    assert line.endswith(f"; {advice}") and "nmt-from-" not in line
    assert not (tmp_path / "data").exists() and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("kind", SOURCES)
def test_a_tokenizer_that_is_not_its_checkpoints_is_refused_before_any_data(
        run_copy: Path, tmp_path: Path, kind: str) -> None:
    """A tokenizer of the same size but other words: refused when ``--from`` is opened, by the
    digest the checkpoint records, before the corpus is prepared with it."""
    tok = run_tokenizer(run_copy)
    assert isinstance(tok, WordTokenizer)
    WordTokenizer(tok.src_itos[:4] + tok.src_itos[4:][::-1]).save(run_copy / "tokenizer")
    source = as_source(run_copy, tmp_path, kind)
    code, _, err = invoke("train", "--from", str(source), "--runs-dir", str(tmp_path / "runs"),
                          "--data-dir", str(tmp_path / "data"))
    line = one_line_error(code, err)
    assert line.startswith(f"error: {named(source, kind, portable.CHECKPOINT)}: incompatible "
                           f"with {named(source, kind, 'tokenizer')} (trained with another "
                           "tokenizer of the same size")
    assert "nmt-from-" not in line
    assert not (tmp_path / "data").exists() and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("kind", SOURCES)
def test_a_bad_setting_names_the_parents_config_as_its_base(run_copy: Path, tmp_path: Path,
                                                            kind: str) -> None:
    source = as_source(run_copy, tmp_path, kind)
    code, _, err = invoke("train", "--from", str(source), "--runs-dir", str(tmp_path / "runs"),
                          "--set", "train.lr=-1")
    line = one_line_error(code, err)
    assert line.startswith(f"error: the config of --from {source} (with --set): train.lr: ")
    assert "defaults" not in line


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(("make", "says"), [
    (lambda p: Path("/dev/null"), "is a character device, not a run directory, export or "
                                  "package"),
    (_fifo, "is a named pipe (FIFO), not a run directory, export or package"),
    (lambda p: (p.write_text("x"), p)[1], "is a file that is not a zip archive (an "
                                          ".argosmodel package is one)"),
    (lambda p: p, "run directory, export or package not found"),
    (lambda p: (p.symlink_to(p.parent / "gone"), p)[1], "a symbolic link to "),
], ids=["device", "fifo", "not a zip", "missing", "dangling link"])
def test_a_path_that_is_none_of_what_from_takes_says_what_it_is(
        tmp_path: Path, make: Any, says: str) -> None:
    given = make(tmp_path / "given")
    code, _, err = invoke("train", "--from", str(given), "--runs-dir", str(tmp_path / "runs"))
    line = one_line_error(code, err)
    assert line.startswith(f"error: --from {given}: {says}")
    assert line.endswith("; expected a run directory, an export directory made with nmt export "
                         "--with-checkpoint, or its .argosmodel package")
