"""Get ``fra-eng.zip``, check it, and extract ``fra-eng/fra.txt`` safely into the data directory.

Where the archive comes from, first match wins: ``source`` (``--source FILE|DIR|URL``), the
``NMT_DATA_MIRROR`` environment variable (a zip file or a directory holding ``fra-eng.zip``), the
original address :data:`CORPUS_URL`. The text file's SHA-256 must equal :func:`expected_digest`.

Extraction refuses the whole archive when any entry has an absolute path, a ``..`` component, is
a symbolic link, or declares (or turns out) more bytes than :data:`MAX_ENTRY_BYTES`; only the two
known entries are written, each to a temporary file renamed into place after verification, so an
interrupted run never leaves a half corpus that looks valid.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import tempfile
import urllib.error
import urllib.request
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import IO

from nmt.errors import DataError, os_reason
from nmt.files import make_dirs, remove_stale_files, umask_mode

CORPUS_URL = "http://d2l-data.s3-accelerate.amazonaws.com/fra-eng.zip"
CORPUS_SHA256 = "0bb85dbaa1c896844649094d7eaf2e34bee34e84fe362b26ce7e8f2e12aae104"  # fra.txt
ZIP_NAME = "fra-eng.zip"
TEXT_ENTRY = "fra-eng/fra.txt"
ABOUT_ENTRY = "fra-eng/_about.txt"  # licence and attribution: kept beside the text
MAX_ENTRY_BYTES = 64 * 2**20  # fra.txt is 11.7 MB; anything far larger is a zip bomb
_CHUNK = 2**20
HINT = (
    "point it at a local copy with --source FILE|DIR|URL or the NMT_DATA_MIRROR environment "
    "variable (a fra-eng.zip or a directory holding one)"
)


def default_data_dir() -> Path:
    """``$NMT_DATA_DIR`` or ``./data``."""
    return Path(os.environ.get("NMT_DATA_DIR") or "data")


def expected_digest() -> str:
    """SHA-256 the text file must have: ``$NMT_CORPUS_SHA256`` (another corpus version, test
    corpora) or the published digest."""
    digest = os.environ.get("NMT_CORPUS_SHA256") or CORPUS_SHA256
    if not re.fullmatch(r"[0-9a-fA-F]{64}", digest):
        raise DataError(f"NMT_CORPUS_SHA256={digest!r:.80}: expected a SHA-256 digest (64 "
                        "hexadecimal digits), or unset it for the published corpus")
    return digest.lower()


def corpus_path(data_dir: Path) -> Path:
    return Path(data_dir) / TEXT_ENTRY


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(_CHUNK), b""):
                h.update(chunk)
    except OSError as e:
        raise DataError(f"{path}: cannot read ({os_reason(e)})") from None
    return h.hexdigest()


def ensure_corpus(
    data_dir: Path,
    source: str | None = None,
    *,
    log: Callable[[str], None] = print,
    expected_sha256: str | None = None,
    progress: bool = True,
) -> Path:
    """Return the path of a verified ``fra.txt`` under ``data_dir``, fetching it when missing.

    A present file with the expected digest is used as it is (nothing is fetched or written);
    one with another digest (an older or damaged copy) is replaced.
    """
    data_dir = Path(data_dir)
    digest = expected_sha256 or expected_digest()
    target = corpus_path(data_dir)
    if target.is_file():
        found = sha256_file(target)
        if found == digest:
            log(f"corpus present and verified: {target} (sha256 {digest[:12]}...)")
            return target
        log(f"{target}: sha256 {found[:12]}... is not the expected {digest[:12]}...; "
            "fetching again")
    where = resolve_source(source)
    make_dirs(data_dir, "--data-dir")
    if where.startswith(("http://", "https://")):
        with tempfile.TemporaryDirectory(dir=data_dir, prefix=".download-") as tmp:
            archive = Path(tmp) / ZIP_NAME
            _download(where, archive, log=log, progress=progress)
            extract_corpus(archive, data_dir, digest, label=where)
    else:
        log(f"using local copy {where}")
        extract_corpus(Path(where), data_dir, digest)
    log(f"corpus verified and extracted: {target} (sha256 {digest[:12]}...)")
    return target


def resolve_source(source: str | None) -> str:
    """A URL or the path of a zip file, from ``source``, ``$NMT_DATA_MIRROR`` or the default."""
    mirror = os.environ.get("NMT_DATA_MIRROR")
    for value, name in ((source, "--source"), (mirror, "NMT_DATA_MIRROR")):
        if not value:
            continue
        if value.startswith(("http://", "https://")):
            return value
        path = Path(value).expanduser()
        if path.is_dir():
            path = path / ZIP_NAME
            if not path.is_file():
                raise DataError(f"{name}={value}: directory has no {ZIP_NAME}")
        elif not path.is_file():
            raise DataError(f"{name}={value}: file not found (expected {ZIP_NAME}, a directory "
                            "holding it, or an http(s) URL)")
        return str(path)
    return CORPUS_URL


def _download(url: str, dest: Path, *, log: Callable[[str], None], progress: bool) -> None:
    from tqdm import tqdm

    log(f"downloading {url}")
    try:
        with urllib.request.urlopen(url, timeout=30) as resp, open(dest, "wb") as out:
            total = int(resp.headers.get("Content-Length") or 0) or None
            with tqdm(total=total, unit="B", unit_scale=True, desc=ZIP_NAME,
                      disable=not progress, leave=False) as bar:
                for chunk in iter(lambda: resp.read(_CHUNK), b""):
                    out.write(chunk)
                    bar.update(len(chunk))
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", None) or e
        raise DataError(f"cannot download {url} ({reason}); {HINT}") from None


def _check_entry(info: zipfile.ZipInfo, label: str) -> None:
    name = info.filename
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise DataError(f"{label}: refusing archive entry with an absolute path: {name!r}")
    if ".." in parts:
        raise DataError(f"{label}: refusing archive entry that climbs out with '..': {name!r}")
    if stat.S_ISLNK(info.external_attr >> 16):
        raise DataError(f"{label}: refusing symbolic-link archive entry: {name!r}")
    if info.file_size > MAX_ENTRY_BYTES:
        raise DataError(f"{label}: refusing archive entry {name!r} of {info.file_size} bytes "
                        f"(expected at most {MAX_ENTRY_BYTES}; a zip bomb?)")


def _copy_limited(src: IO[bytes], dst: IO[bytes], name: str, label: str) -> str:
    """Copy at most MAX_ENTRY_BYTES (the header's size can lie) and return the SHA-256."""
    h, n = hashlib.sha256(), 0
    for chunk in iter(lambda: src.read(_CHUNK), b""):
        n += len(chunk)
        if n > MAX_ENTRY_BYTES:
            raise DataError(f"{label}: refusing archive entry {name!r}: more than "
                            f"{MAX_ENTRY_BYTES} bytes once decompressed (a zip bomb?)")
        h.update(chunk)
        dst.write(chunk)
    return h.hexdigest()


PART_PREFIX = ".part-"  # entries being extracted


def extract_corpus(archive: Path, data_dir: Path, digest: str, label: str | None = None) -> Path:
    """Check every entry of ``archive``, then write ``fra-eng/fra.txt`` (and ``_about.txt``)
    under ``data_dir`` atomically, the text only when its SHA-256 is ``digest``."""
    label = label or str(archive)
    if not archive.is_file():
        raise DataError(f"{label}: file not found")
    try:  # is_zipfile says False for a file it cannot open
        archive.open("rb").close()
    except OSError as e:
        raise DataError(f"{label}: cannot read ({os_reason(e)})") from None
    if not zipfile.is_zipfile(archive):
        raise DataError(f"{label}: not a zip archive (expected {ZIP_NAME})")
    try:
        with zipfile.ZipFile(archive) as z:
            infos = z.infolist()
            for info in infos:
                _check_entry(info, label)
            by_name = {i.filename: i for i in infos}
            if TEXT_ENTRY not in by_name:
                raise DataError(f"{label}: wrong content: no {TEXT_ENTRY} in the archive")
            out_dir = Path(data_dir) / "fra-eng"
            make_dirs(out_dir)
            remove_stale_files(out_dir, f"{PART_PREFIX}*")  # left by a killed extraction
            staged: list[tuple[Path, Path]] = []
            try:
                for name in (ABOUT_ENTRY, TEXT_ENTRY):  # the text last: its presence means done
                    if name not in by_name:
                        continue
                    fd, tmp_name = tempfile.mkstemp(dir=out_dir, prefix=PART_PREFIX)
                    os.fchmod(fd, umask_mode(0o666))  # as any extracted file, not mkstemp's 0600
                    tmp = Path(tmp_name)
                    staged.append((tmp, out_dir / Path(name).name))
                    with os.fdopen(fd, "wb") as dst, z.open(by_name[name]) as src:
                        found = _copy_limited(src, dst, name, label)
                    if name == TEXT_ENTRY and found != digest:
                        raise DataError(f"{label}: wrong content: SHA-256 of {TEXT_ENTRY} is "
                                        f"{found}, expected {digest}")
                for tmp, final in staged:
                    os.replace(tmp, final)
            finally:
                for tmp, _ in staged:
                    tmp.unlink(missing_ok=True)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError,
            zlib.error, RuntimeError) as e:  # RuntimeError: an encrypted entry
        raise DataError(f"{label}: damaged zip archive ({e})") from None
    except OSError as e:
        raise DataError(f"{label}: cannot extract into {data_dir} ({e.strerror or e})") from None
    return Path(data_dir) / TEXT_ENTRY

