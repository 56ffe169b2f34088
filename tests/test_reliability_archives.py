"""Hostile or damaged corpus archives: a real zip bomb, a header that lies about sizes, a
corrupt deflate stream, an encrypted entry, a disk that fills up during extraction.

Each is refused with a one-line DataError and leaves nothing in the data directory that looks
like a corpus. Path traversal, absolute paths, symlinks, a bomb over a lowered limit, non-zip
files and checksum mismatches are in test_data_download.py.
"""

from __future__ import annotations

import errno
import hashlib
import os
import struct
import zipfile
from pathlib import Path
from typing import IO

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import nmt.data.download as dl
from nmt.cli import app
from nmt.data.download import ensure_corpus
from nmt.errors import DataError

TEXT = ("Go.\tVa !\n" * 500).encode()
DIGEST = hashlib.sha256(TEXT).hexdigest()
ENTRY = "fra-eng/fra.txt"


@pytest.fixture(autouse=True)
def offline(no_network: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NMT_CORPUS_SHA256", raising=False)


def quiet(msg: str) -> None:
    pass


def nothing_extracted(data: Path) -> bool:
    out = data / "fra-eng"
    return not out.exists() or list(out.iterdir()) == []


def _good_zip(path: Path, compression: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression) as z:
        z.writestr(ENTRY, TEXT)
    return path


def _patch_headers(path: Path, **fields: int) -> None:
    """Rewrite fields of the (single) entry's local and central headers in place."""
    offsets = {  # (local header, central header) offsets of each field
        "flags": (6, 8), "crc": (14, 16), "compressed": (18, 20), "size": (22, 24),
    }
    data = bytearray(path.read_bytes())
    local, central = data.find(b"PK\x03\x04"), data.find(b"PK\x01\x02")
    for name, value in fields.items():
        fmt = "<H" if name == "flags" else "<I"
        for start, off in zip((local, central), offsets[name], strict=True):
            data[start + off: start + off + struct.calcsize(fmt)] = struct.pack(fmt, value)
    path.write_bytes(bytes(data))


def test_real_zip_bomb_is_refused_before_decompressing(tmp_path: Path) -> None:
    """64 MiB + 1 of zeros compress to ~65 KB: refused from its declared size, through the
    CLI, at the real limit (no monkeypatching)."""
    bomb = tmp_path / "fra-eng.zip"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z, z.open(
            ENTRY, "w") as f:
        chunk = bytes(2**20)
        for _ in range(dl.MAX_ENTRY_BYTES // len(chunk)):
            f.write(chunk)
        f.write(b"\0")
    assert bomb.stat().st_size < dl.MAX_ENTRY_BYTES // 100
    data = tmp_path / "data"
    result = CliRunner().invoke(app, ["data", "download", "--source", str(bomb),
                                      "--data-dir", str(data)])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and result.stderr.strip().endswith(errors[0])
    err = errors[0]
    assert f"refusing archive entry '{ENTRY}' of {dl.MAX_ENTRY_BYTES + 1} bytes" in err
    assert "zip bomb" in err
    assert nothing_extracted(data)


def test_header_that_understates_the_size_is_refused(tmp_path: Path) -> None:
    """The headers claim 100 bytes but the stream holds 4500: extraction stops at the claim
    and the CRC no longer matches; nothing is written."""
    archive = _good_zip(tmp_path / "lying.zip")
    _patch_headers(archive, size=100)
    with pytest.raises(DataError, match="cannot read the zip archive: damaged"):
        ensure_corpus(tmp_path / "data", str(archive), expected_sha256=DIGEST, log=quiet)
    assert nothing_extracted(tmp_path / "data")


def test_corrupt_deflate_stream_is_refused(tmp_path: Path) -> None:
    archive = _good_zip(tmp_path / "corrupt.zip")
    data = bytearray(archive.read_bytes())
    start = data.find(b"PK\x03\x04") + 30 + len(ENTRY)
    data[start + 2: start + 6] = b"\xff\xff\xff\xff"  # the compressed stream, not the headers
    archive.write_bytes(bytes(data))
    with pytest.raises(DataError, match="cannot read the zip archive: damaged") as e:
        ensure_corpus(tmp_path / "data", str(archive), expected_sha256=DIGEST, log=quiet)
    assert "\n" not in str(e.value)
    assert nothing_extracted(tmp_path / "data")


def test_encrypted_entry_is_refused(tmp_path: Path) -> None:
    archive = _good_zip(tmp_path / "encrypted.zip", zipfile.ZIP_STORED)
    _patch_headers(archive, flags=0x1)  # "encrypted": zipfile wants a password
    with pytest.raises(DataError, match="cannot read the zip archive: a member is encrypted"):
        ensure_corpus(tmp_path / "data", str(archive), expected_sha256=DIGEST, log=quiet)
    assert nothing_extracted(tmp_path / "data")


def test_disk_full_during_extraction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = _good_zip(tmp_path / "fra-eng.zip")
    real = dl._copy_limited

    def fills_up(src: IO[bytes], dst: IO[bytes], name: str, label: str) -> str:
        if name == ENTRY:
            dst.write(src.read(1000))
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(src, dst, name, label)

    monkeypatch.setattr(dl, "_copy_limited", fills_up)
    data = tmp_path / "data"
    with pytest.raises(DataError) as e:
        ensure_corpus(data, str(archive), expected_sha256=DIGEST, log=quiet)
    assert str(e.value) == (f"{archive}: cannot extract into {data} (No space left on device)")
    assert nothing_extracted(data)  # the partial file is gone
    monkeypatch.undo()
    assert ensure_corpus(data, str(archive), expected_sha256=DIGEST, log=quiet).read_bytes() == (
        TEXT)


ENTRY_NAMES = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
                      min_size=1, max_size=120)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=ENTRY_NAMES, second=ENTRY_NAMES, bad=st.sampled_from(["", "/", "../"]))
def test_an_archives_entry_names_never_break_the_one_line_error(
        tmp_path: Path, first: str, second: str, bad: str) -> None:
    """Whatever an archive names its entries (line breaks, control characters, spaces at the
    ends, thousands of characters), the error that names them is one line: two text files
    where one was expected, or an entry refused for its path."""
    path = tmp_path / "user.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(bad + first + ".txt", TEXT)
        z.writestr(second + "/b.txt", TEXT)
    with pytest.raises(DataError) as caught:
        dl.read_archive(path, str(path))
    message = str(caught.value)
    assert message.isprintable() and message == message.strip(), message
    assert len(message) < len(str(path)) + 400
