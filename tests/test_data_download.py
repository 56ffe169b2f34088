"""Download and extraction: sources, checksum, unsafe archives, atomicity, idempotence."""

from __future__ import annotations

import hashlib
import io
import stat
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest

import nmt.data.download as dl
from nmt.data.download import CORPUS_URL, ensure_corpus, resolve_source
from nmt.errors import DataError

TEXT = "Go.\tVa !\nHi.\tSalut !\n"
DIGEST = hashlib.sha256(TEXT.encode()).hexdigest()


def make_zip(path: Path, entries: dict[str, str], symlinks: tuple[str, ...] = ()) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, content in entries.items():
            z.writestr(name, content)
        for name in symlinks:
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            z.writestr(info, "/etc/passwd")
    return path


@pytest.fixture()
def good_zip(tmp_path: Path) -> Path:
    return make_zip(tmp_path / "fra-eng.zip", {"fra-eng/fra.txt": TEXT, "fra-eng/_about.txt": "x"})


@pytest.fixture(autouse=True)
def no_network_and_real_digest(no_network: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NMT_CORPUS_SHA256", raising=False)


def quiet(msg: str) -> None:
    pass


def test_extracts_verifies_and_is_idempotent(good_zip: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    path = ensure_corpus(data, str(good_zip), expected_sha256=DIGEST, log=quiet)
    assert path == data / "fra-eng" / "fra.txt" and path.read_text() == TEXT
    assert (data / "fra-eng" / "_about.txt").read_text() == "x"
    assert sorted(p.name for p in (data / "fra-eng").iterdir()) == ["_about.txt", "fra.txt"]
    good_zip.unlink()  # a second run needs no source at all
    mtime = path.stat().st_mtime_ns
    messages: list[str] = []
    assert ensure_corpus(data, None, expected_sha256=DIGEST, log=messages.append) == path
    assert path.stat().st_mtime_ns == mtime
    assert messages == [f"corpus present and verified: {path} (sha256 {DIGEST[:12]}...)"]


def test_directory_source_and_mirror_env(good_zip: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_source(str(good_zip.parent)) == str(good_zip)
    monkeypatch.setenv("NMT_DATA_MIRROR", str(good_zip.parent))
    assert resolve_source(None) == str(good_zip)
    assert resolve_source("https://example.org/x.zip") == "https://example.org/x.zip"
    monkeypatch.delenv("NMT_DATA_MIRROR")
    assert resolve_source(None) == CORPUS_URL
    monkeypatch.setenv("NMT_CORPUS_SHA256", DIGEST)  # the test-corpus escape hatch
    assert ensure_corpus(tmp_path / "d", str(good_zip.parent), log=quiet).is_file()


def test_checksum_mismatch_names_expected_and_found(good_zip: Path, tmp_path: Path) -> None:
    with pytest.raises(DataError) as e:
        ensure_corpus(tmp_path / "data", str(good_zip), log=quiet)  # the real corpus' digest
    msg = str(e.value)
    assert "wrong content" in msg and dl.CORPUS_SHA256 in msg and DIGEST in msg
    assert "\n" not in msg
    # nothing that looks like a corpus is left behind
    assert not (tmp_path / "data" / "fra-eng" / "fra.txt").exists()
    assert list((tmp_path / "data" / "fra-eng").iterdir()) == []


@pytest.mark.parametrize(("entries", "symlinks", "expected"), [
    ({"fra-eng/fra.txt": TEXT, "/etc/evil": "x"}, (), "absolute path"),
    ({"fra-eng/fra.txt": TEXT, "C:/evil": "x"}, (), "absolute path"),
    ({"fra-eng/fra.txt": TEXT, "fra-eng/../../evil": "x"}, (), "'..'"),
    ({"fra-eng/fra.txt": TEXT}, ("fra-eng/link",), "symbolic-link"),
    ({"other/fra.txt": TEXT}, (), "no fra-eng/fra.txt"),
])
def test_unsafe_or_wrong_archives_are_refused(tmp_path: Path, entries: dict[str, str],
                                              symlinks: tuple[str, ...], expected: str) -> None:
    bad = make_zip(tmp_path / "bad.zip", entries, symlinks)
    data = tmp_path / "data"
    with pytest.raises(DataError, match=expected):
        ensure_corpus(data, str(bad), expected_sha256=DIGEST, log=quiet)
    assert not (tmp_path / "evil").exists() and not Path("/etc/evil").exists()
    assert not (data / "fra-eng" / "fra.txt").exists()


def test_zip_bomb_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dl, "MAX_ENTRY_BYTES", 1000)
    bomb = make_zip(tmp_path / "bomb.zip", {"fra-eng/fra.txt": "a" * 5000})
    with pytest.raises(DataError, match="zip bomb"):
        ensure_corpus(tmp_path / "data", str(bomb), expected_sha256=DIGEST, log=quiet)
    # a header that understates the size is caught while decompressing
    with pytest.raises(DataError, match="once decompressed"):
        dl._copy_limited(io.BytesIO(b"a" * 5000), io.BytesIO(), "fra.txt", "x.zip")


def test_not_a_zip_and_missing_file(tmp_path: Path) -> None:
    text = tmp_path / "fra.txt"
    text.write_text(TEXT)
    with pytest.raises(DataError, match="not a zip archive"):
        ensure_corpus(tmp_path / "data", str(text), expected_sha256=DIGEST, log=quiet)
    with pytest.raises(DataError, match="file not found"):
        ensure_corpus(tmp_path / "data", str(tmp_path / "nope.zip"), log=quiet)
    with pytest.raises(DataError, match="has no fra-eng.zip"):
        ensure_corpus(tmp_path / "data", str(tmp_path), log=quiet)


def test_no_network_and_no_copy_says_how_to_point_at_a_file(tmp_path: Path) -> None:
    with pytest.raises(DataError) as e:
        ensure_corpus(tmp_path / "data", None, log=quiet, progress=False)
    assert CORPUS_URL in str(e.value) and "--source" in str(e.value)
    assert "NMT_DATA_MIRROR" in str(e.value)
    assert not any((tmp_path / "data").rglob("*.zip"))  # the temporary download is gone


class FakeResponse(io.BytesIO):
    def __init__(self, payload: bytes) -> None:
        super().__init__(payload)
        self.headers = {"Content-Length": str(len(payload))}

    def __enter__(self) -> FakeResponse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def test_url_download(good_zip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    payload = good_zip.read_bytes()
    urls: list[str] = []
    agents: list[str | None] = []

    def fake_urlopen(request: urllib.request.Request, timeout: float) -> FakeResponse:
        urls.append(request.full_url)
        agents.append(request.get_header("User-agent"))
        return FakeResponse(payload)

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    path = ensure_corpus(tmp_path / "data", None, expected_sha256=DIGEST, log=quiet,
                         progress=False)
    assert urls == [CORPUS_URL] and path.read_text() == TEXT
    # ManyThings.org is reported to refuse urllib's default User-Agent
    assert agents == [dl.USER_AGENT] and "urllib" not in (agents[0] or "")
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["fra-eng"]


def test_damaged_copy_is_replaced(good_zip: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "fra-eng").mkdir(parents=True)
    (data / "fra-eng" / "fra.txt").write_text(TEXT[:5])  # an interrupted copy by other means
    messages: list[str] = []
    path = ensure_corpus(data, str(good_zip), expected_sha256=DIGEST, log=messages.append)
    assert path.read_text() == TEXT
    assert "fetching again" in messages[0]
