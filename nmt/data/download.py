"""Get a Tatoeba archive (the built-in ``fra-eng.zip``, or a pair such as ``deu-eng.zip``),
check it, and extract its text file safely into the data directory.

Where the archive comes from, first match wins: ``source`` (``--source FILE|DIR|URL``), the
``NMT_DATA_MIRROR`` environment variable (a zip file or a directory holding ``NAME.zip``), the
original address (:data:`CORPUS_URL` for ``fra-eng``, ManyThings.org for other pairs). The
built-in corpus's text must have the SHA-256 :func:`expected_digest`; another pair's digest is
recorded (the site updates its files), not pinned.

Extraction refuses the whole archive when any entry has an absolute path, a ``..`` component, is
a symbolic link, or declares (or turns out) more bytes than :data:`MAX_ENTRY_BYTES`; only the two
known entries are written, each to a temporary file renamed into place after verification, so an
interrupted run never leaves a half corpus that looks valid.
"""

from __future__ import annotations

import hashlib
import http.client
import io
import os
import re
import stat
import urllib.error
import urllib.parse
import urllib.request
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from nmt import environment
from nmt.errors import DataError, named, os_reason, shown
from nmt.files import Temporary, make_dirs, path_problem, umask_mode, user_path

CORPUS_URL = "http://d2l-data.s3-accelerate.amazonaws.com/fra-eng.zip"
CORPUS_SHA256 = "0bb85dbaa1c896844649094d7eaf2e34bee34e84fe362b26ce7e8f2e12aae104"  # fra.txt
ZIP_NAME = "fra-eng.zip"
TEXT_ENTRY = "fra-eng/fra.txt"
ABOUT_ENTRY = "fra-eng/_about.txt"  # licence and attribution: kept beside the text
TATOEBA_URL = "https://www.manythings.org/anki/{name}.zip"
# the site is reported to refuse urllib's default User-Agent
USER_AGENT = "nmt (https://github.com/; a neural machine translation toolkit)"
MAX_ENTRY_BYTES = 256 * 2**20  # fra.txt is 11.7 MB, the site's largest pairs tens of MB
_CHUNK = 2**20


@dataclass(frozen=True)
class Archive:
    """A Tatoeba archive: ``NAME.zip`` holding ``XXX.txt`` (ManyThings.org) or
    ``NAME/XXX.txt`` (the d2l copy), extracted into ``data_dir/NAME/XXX.txt``."""

    name: str  # "fra-eng"
    url: str
    sha256: str | None  # the text's pinned digest; None: recorded at download, not checked

    @property
    def zip_name(self) -> str:
        return f"{self.name}.zip"

    @property
    def text_name(self) -> str:
        return f"{self.name.split('-')[0]}.txt"


FRA_ENG = Archive("fra-eng", CORPUS_URL, CORPUS_SHA256)


def tatoeba_archive(pair: str) -> Archive:
    """A pair of the site, ``"deu-eng"``: downloaded from ManyThings.org, digest recorded."""
    return Archive(pair, TATOEBA_URL.format(name=pair), None)


def hint(archive: Archive = FRA_ENG) -> str:
    return ("point it at a local copy with --source FILE|DIR|URL or the NMT_DATA_MIRROR "
            f"environment variable (a {archive.zip_name} or a directory holding one)")


HINT = hint()


def default_data_dir() -> Path:
    """``$NMT_DATA_DIR`` or ``./data``."""
    return Path(environment.read("NMT_DATA_DIR") or "data")


def expected_digest(archive: Archive = FRA_ENG) -> str | None:
    """SHA-256 the text file must have: for the built-in corpus ``$NMT_CORPUS_SHA256`` (another
    corpus version, test corpora) or the published digest; for another pair none."""
    if archive != FRA_ENG:
        return archive.sha256
    return (environment.read("NMT_CORPUS_SHA256") or CORPUS_SHA256).lower()


def corpus_path(data_dir: Path, archive: Archive = FRA_ENG) -> Path:
    return Path(data_dir) / archive.name / archive.text_name


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
    archive: Archive = FRA_ENG,
) -> Path:
    """Return the path of a verified text file (``fra-eng/fra.txt``) under ``data_dir``,
    fetching ``archive`` when it is missing.

    A present file with the expected digest is used as it is (nothing is fetched or written);
    one with another digest (an older or damaged copy) is replaced. An archive without a pinned
    digest is used as it is once present.
    """
    data_dir = Path(data_dir)
    digest = expected_sha256 or expected_digest(archive)
    target = corpus_path(data_dir, archive)
    if target.is_file():
        found = sha256_file(target)
        if digest is None or found == digest:
            what = "verified" if digest else "recorded"
            log(f"corpus present and {what}: {target} (sha256 {found[:12]}...)")
            return target
        log(f"{target}: sha256 {found[:12]}... is not the expected {digest[:12]}...; "
            "fetching again")
    where = resolve_source(source, archive)
    make_dirs(data_dir, "--data-dir")
    if where.startswith(("http://", "https://")):
        with Temporary(data_dir, ".download-") as tmp:
            zip_path = tmp / archive.zip_name
            download(where, zip_path, archive.zip_name, hint(archive), log=log,
                     progress=progress)
            extract_corpus(zip_path, data_dir, digest, label=where, archive=archive)
    else:
        log(f"using local copy {where}")
        extract_corpus(Path(where), data_dir, digest, archive=archive)
    if digest:
        log(f"corpus verified and extracted: {target} (sha256 {digest[:12]}...)")
    else:
        log(f"corpus extracted: {target} (sha256 {sha256_file(target)[:12]}..., recorded)")
    return target


def resolve_source(source: str | None, archive: Archive = FRA_ENG) -> str:
    """A URL or the path of a zip file, from ``source``, ``$NMT_DATA_MIRROR`` or the default.

    A mirror directory is searched for the archive's own ``NAME.zip``; a mirror that is one zip
    file serves the built-in corpus, and another pair only when it has that pair's name."""
    mirror = environment.read("NMT_DATA_MIRROR")
    for value, name in ((source, "--source"), (mirror, "NMT_DATA_MIRROR")):
        if not value:
            continue
        if value.startswith(("http://", "https://")):
            return value
        path = user_path(value, name)
        if path.is_dir():
            path = path / archive.zip_name
            if not path.is_file():
                raise DataError(f"{name}={value}: directory has no {archive.zip_name}")
        elif path_problem(path):
            raise DataError(f"{name}={value}: {path_problem(path)} (expected {archive.zip_name}, "
                            "a directory holding it, or an http(s) URL)")
        elif name == "NMT_DATA_MIRROR" and archive != FRA_ENG and path.name != archive.zip_name:
            continue  # a one-file mirror of another corpus
        return str(path)
    return archive.url


def download(url: str, dest: Path, name: str, advice: str, *, log: Callable[[str], None],
             progress: bool = True) -> None:
    """Write what ``url`` serves to ``dest`` (a held temporary file: the caller renames it), a
    progress bar naming ``name``; a failure is one line ending in ``advice``."""
    from tqdm import tqdm

    log(f"downloading {url}")
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp, open(dest, "wb") as out:
            total = int(resp.headers.get("Content-Length") or 0) or None
            with tqdm(total=total, unit="B", unit_scale=True, desc=name,
                      disable=not progress, leave=False) as bar:
                for chunk in iter(lambda: resp.read(_CHUNK), b""):
                    out.write(chunk)
                    bar.update(len(chunk))
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as e:
        reason = getattr(e, "reason", None) or e
        if isinstance(e, urllib.error.HTTPError):
            reason = f"HTTP {e.code}: {reason}"
        raise DataError(f"cannot download {url} ({reason}); {advice}") from None


def _check_served(path: Path, name: str, url: str) -> None:
    """A one-line error when what ``url`` served is not what its name says (a zip archive, a
    compressed file): a server's error page sent with "200 OK"."""
    from nmt.data.compressed import FORMATS, format_of, suffix_of

    with open(path, "rb") as f:
        head = f.read(16)
    lower = name.lower()
    if lower.endswith((".zip", ".argosdata")) and not zipfile.is_zipfile(path):
        kind = "zip archive"
    elif (said := suffix_of(name)) and format_of(head) != said:
        kind = f"{FORMATS[said][0]}-compressed file"
    else:
        return
    raise DataError(f"cannot download {url}: what it served is no {kind} (it begins "
                    f"{head[:12]!r}); nothing was kept")


DOWNLOADS = "downloads"  # the data directory's folder of corpora given by URL
_URL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def fetch_url(url: str, data_dir: Path, *, log: Callable[[str], None] = print,
              progress: bool = True) -> Path:
    """The local copy of the corpus file at ``url`` (``data.corpus = "https://..."``, as
    Locomotive takes its sources): ``DATA_DIR/downloads/KEY-NAME``, downloaded the first time
    (to a held temporary file renamed into place, so an interrupted download leaves nothing
    that looks whole) and used as it is after (its digest, like every corpus file's, keys the
    cache). ``NAME`` is the URL's file name, which says its form (``.argosdata``, ``.tmx.gz``,
    ``.txt.zip``)."""
    parsed = urllib.parse.urlsplit(url)
    name = urllib.parse.unquote(parsed.path.rsplit("/", 1)[-1])
    if not _URL_NAME.fullmatch(name) or name.strip(".") != name:
        raise DataError(f"{url}: expected the URL of a corpus file whose name says its form "
                        f"(data-europarl-en_de.argosdata, en-fr.tmx.gz), got the name "
                        f"{shown(name, 40)!s}")
    key = hashlib.sha256(url.encode()).hexdigest()[:12]
    folder = Path(data_dir) / DOWNLOADS
    path = folder / f"{key}-{name}"
    if path.is_file():
        log(f"using the download of {url}: {path}")
        return path
    make_dirs(folder, "--data-dir")
    try:
        with Temporary(folder, f".{key}-", ".tmp", folder=False) as tmp:
            download(url, tmp, name, "download it by hand and give its path instead", log=log,
                     progress=progress)
            _check_served(tmp, name, url)  # not kept: an error page would be read for ever
            os.replace(tmp, path)
    except OSError as e:
        raise DataError(f"{path}: cannot write ({os_reason(e)})") from None
    return path


def _check_entry(info: zipfile.ZipInfo, label: str) -> None:
    name = info.filename
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise DataError(f"{label}: refusing archive entry with an absolute path: "
                        f"{shown(name, 80)}")
    if ".." in parts:
        raise DataError(f"{label}: refusing archive entry that climbs out with '..': "
                        f"{shown(name, 80)}")
    if stat.S_ISLNK(info.external_attr >> 16):
        raise DataError(f"{label}: refusing symbolic-link archive entry: {shown(name, 80)}")
    if info.file_size > MAX_ENTRY_BYTES:
        raise DataError(f"{label}: refusing archive entry {shown(name, 80)} of "
                        f"{info.file_size} bytes (expected at most {MAX_ENTRY_BYTES}; a zip bomb?)")


def _copy_limited(src: IO[bytes], dst: IO[bytes], name: str, label: str) -> str:
    """Copy at most MAX_ENTRY_BYTES (the header's size can lie) and return the SHA-256."""
    h, n = hashlib.sha256(), 0
    for chunk in iter(lambda: src.read(_CHUNK), b""):
        n += len(chunk)
        if n > MAX_ENTRY_BYTES:
            raise DataError(f"{label}: refusing archive entry {shown(name, 80)}: more than "
                            f"{MAX_ENTRY_BYTES} bytes once decompressed (a zip bomb?)")
        h.update(chunk)
        dst.write(chunk)
    return h.hexdigest()


PART_PREFIX = ".part-"  # entries being extracted


def _entries(by_name: dict[str, zipfile.ZipInfo], archive: Archive,
             label: str) -> tuple[str, str | None]:
    """The text entry (``NAME/XXX.txt`` or ``XXX.txt``) and the about entry, if any."""
    for folder in (f"{archive.name}/", ""):
        if folder + archive.text_name in by_name:
            about = folder + "_about.txt"
            return folder + archive.text_name, about if about in by_name else None
    raise DataError(f"{label}: wrong content: no {archive.name}/{archive.text_name} "
                    f"(nor {archive.text_name}) in the archive")


@contextmanager
def checked_zip(path: Path, label: str, expected: str = ""
                ) -> Iterator[tuple[zipfile.ZipFile, list[zipfile.ZipInfo]]]:
    """``path`` opened as a zip archive, with its entries, once every entry has passed
    :func:`_check_entry`: a missing, unreadable, non-zip or damaged archive (anywhere in the
    block, reads included) is a one-line :class:`DataError` after ``label`` (``expected`` is
    added to the "not a zip archive" message)."""
    problem = path_problem(path)
    if problem:
        raise DataError(f"{label}: {problem}")
    try:  # is_zipfile says False for a file it cannot open
        path.open("rb").close()
    except OSError as e:
        raise DataError(f"{label}: cannot read ({os_reason(e)})") from None
    if not zipfile.is_zipfile(path):
        raise DataError(f"{label}: not a zip archive{expected}")
    try:
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
            for info in infos:
                _check_entry(info, label)
            yield z, infos
    except ZIP_ERRORS as e:
        raise DataError(f"{label}: cannot read the zip archive: {zip_problem(e)}") from None


# what zipfile raises for an archive it cannot read (RuntimeError: an encrypted member;
# zlib.error and EOFError: a damaged or cut-short member)
ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError,
              EOFError, zlib.error)


def zip_problem(e: Exception) -> str:
    """What zipfile's error ``e`` says of an archive, for a message after "cannot read the zip
    archive: ": damaged, an encrypted member, or a compression method zipfile lacks."""
    if isinstance(e, NotImplementedError):  # (a RuntimeError too)
        return (f"{e} (a compression method Python's zipfile cannot read); unpack it and give "
                "its files instead")
    if isinstance(e, RuntimeError):  # zipfile's word for a member it needs a password for
        return "a member is encrypted"
    return f"damaged ({e})"


def extract_corpus(archive_path: Path, data_dir: Path, digest: str | None,
                   label: str | None = None, archive: Archive = FRA_ENG) -> Path:
    """Check every entry of ``archive_path``, then write the text file (``fra-eng/fra.txt``)
    and ``_about.txt`` under ``data_dir/NAME/`` atomically, the text only when its SHA-256 is
    ``digest`` (any, when None)."""
    label = label or str(archive_path)
    try:
        with checked_zip(archive_path, label, f" (expected {archive.zip_name})") as (z, infos):
            by_name = {i.filename: i for i in infos}
            text_entry, about_entry = _entries(by_name, archive, label)
            out_dir = Path(data_dir) / archive.name
            make_dirs(out_dir)
            staged: list[tuple[Temporary, Path]] = []
            try:  # the text last: its presence means done
                for name in (about_entry, text_entry):
                    if name is None:
                        continue
                    # held while written; those a killed extraction left are removed
                    tmp = Temporary(out_dir, PART_PREFIX, folder=False)
                    staged.append((tmp, out_dir / Path(name).name))
                    fd = os.open(tmp.path, os.O_WRONLY)
                    os.fchmod(fd, umask_mode(0o666))  # as any extracted file, not mkstemp's 0600
                    with os.fdopen(fd, "wb") as dst, z.open(by_name[name]) as src:
                        found = _copy_limited(src, dst, name, label)
                    if name == text_entry and digest is not None and found != digest:
                        raise DataError(f"{label}: wrong content: SHA-256 of "
                                        f"{named(text_entry)} is {found}, expected {digest}")
                for tmp, final in staged:
                    os.replace(tmp.path, final)
            finally:
                for tmp, _ in staged:
                    tmp.cleanup()
    except OSError as e:
        raise DataError(f"{label}: cannot extract into {data_dir} ({e.strerror or e})") from None
    return corpus_path(data_dir, archive)


def read_archive(path: Path, label: str) -> tuple[bytes, bytes | None, str]:
    """The one ``*.txt`` text entry of a user's zip (ManyThings.org's ``deu.txt`` or the d2l
    copy's ``deu-eng/deu.txt``) and its ``_about.txt``, read with the same checks as an
    extraction, without writing anything: ``(text, about or None, entry name)``."""
    try:
        with checked_zip(path, label) as (z, infos):
            texts = [i for i in infos if i.filename.endswith(".txt") and not i.is_dir()
                     and Path(i.filename).name != "_about.txt"]
            if len(texts) != 1:
                names = ", ".join(named(i.filename) for i in texts[:3]) or "none"
                more = f" and {len(texts) - 3:,} more" if len(texts) > 3 else ""
                raise DataError(f"{label}: expected one text file (XXX.txt) in the archive, "
                                f"found {names}{more}")
            abouts = [i for i in infos if Path(i.filename).name == "_about.txt"]

            def read(info: zipfile.ZipInfo) -> bytes:
                out = io.BytesIO()
                with z.open(info) as src:
                    _copy_limited(src, out, info.filename, label)
                return out.getvalue()

            return read(texts[0]), read(abouts[0]) if abouts else None, texts[0].filename
    except OSError as e:
        raise DataError(f"{label}: cannot read ({os_reason(e)})") from None
