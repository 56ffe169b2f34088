"""Writing files safely: whole or untouched, never through a planted link, one-line errors.

Every file nmt writes goes through these helpers: run files, checkpoints, hypotheses, scores,
pictures, translations, the extracted corpus. A failure (disk full, no permission, a file in
the way) is a one-line :class:`NmtError` naming the path.
"""

from __future__ import annotations

import errno
import glob
import hashlib
import io
import json
import os
import re
import shutil
import stat
import tempfile
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, BinaryIO, Protocol, TextIO

from nmt import held_signals
from nmt.errors import DataError, NmtError, first_line, os_reason

TMP_SUFFIX = ".tmp"  # temporary files are ".NAME.XXXX.tmp": hidden, never "*.pt"


_KINDS = ((stat.S_ISREG, "file"), (stat.S_ISDIR, "directory"),
          (stat.S_ISFIFO, "named pipe (FIFO)"), (stat.S_ISCHR, "character device"),
          (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket"))


def path_problem(path: Path, want: str = "file", called: str = "") -> str | None:
    """What is wrong with ``path`` where a ``want`` ("file" or "directory") is expected, said
    for a message after the path's name (``called`` names what is expected, default ``want``);
    None when it is one. The one place that tells a
    missing path from a directory, a FIFO, a device (``/dev/zero``), a broken or looping
    symbolic link and an unreadable parent."""
    try:
        mode = path.stat().st_mode  # follows symbolic links
    except FileNotFoundError:
        if path.is_symlink():
            return f"a symbolic link to {os.readlink(path)}, which does not exist"
        return f"{called or want} not found"
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "a symbolic link that loops (it points back to itself)"
        if e.errno == errno.ENOTDIR:
            return f"{called or want} not found (a part of the path is a file, not a directory)"
        return f"cannot be read ({os_reason(e)})"
    kind = next((name for test, name in _KINDS if test(mode)), "special file")
    if kind == want:
        return None
    return f"is a {kind}, not a {called or want}"


def _only_a_file(fd: int, path: Path, error: Callable[[str], Exception]) -> None:
    """The descriptor ``fd``, opened without blocking, made blocking if it is a regular file;
    else closed and ``error`` raised naming what ``path`` is (a FIFO, a directory, a device)."""
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = next((name for test, name in _KINDS if test(mode)), "special file")
        raise error(f"{path}: is a {kind}, not a file")
    os.set_blocking(fd, True)


def open_stored(path: Path, folder: Path | None = None,
                error: type[NmtError] = DataError) -> io.BufferedReader:
    """``path``, a file nmt wrote into a cache, a run or an export (``folder``), open for
    reading: the one check every such file passes before it is read.

    Refused, as ``error`` naming the file and what was expected: anything but a regular file (a
    FIFO would block the open or the read for ever, a device such as ``/dev/zero`` never ends,
    a directory cannot be read), a missing file, and a symbolic link to a place outside
    ``folder`` (a file of the folder is in the folder). The file is opened without blocking and
    checked again once open, so a FIFO put in place between the two checks is refused too."""
    problem = path_problem(path)
    if problem is None and folder is not None:
        problem = _outside(path, folder)
    if problem is not None:
        raise error(f"{path}: {problem}")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise error(f"{path}: cannot read ({os_reason(e)})") from None
    _only_a_file(fd, path, error)
    return open(path, "rb", opener=lambda _path, _flags: fd)  # named by its path


def _outside(path: Path, folder: Path) -> str | None:
    """Why ``path`` (a symbolic link, or under one) is not a file of ``folder``; None when it
    is."""
    try:
        real, home = path.resolve(), folder.resolve()
    except (OSError, RuntimeError) as e:
        return f"cannot resolve the path ({e})"
    if real.is_relative_to(home):
        return None
    return f"a symbolic link to {real}, outside {folder}; expected the file itself"


def read_stored_bytes(path: Path, folder: Path | None = None,
                      error: type[NmtError] = DataError) -> bytes:
    """The bytes of a file of a cache, a run or an export, through :func:`open_stored`."""
    with open_stored(path, folder, error) as f:
        try:
            return f.read()
        except OSError as e:
            raise error(f"{path}: cannot read ({os_reason(e)})") from None


def read_stored_text(path: Path, folder: Path | None = None,
                     error: type[NmtError] = DataError, errors: str = "strict") -> str:
    """The UTF-8 text of a file of a cache, a run or an export, through :func:`open_stored`;
    text that is not UTF-8 is ``error`` naming the file (with ``errors="strict"``)."""
    try:
        return read_stored_bytes(path, folder, error).decode("utf-8", errors)
    except UnicodeDecodeError as e:
        raise error(f"{path}: not UTF-8 text (byte {e.start + 1})") from None


DIGEST_CHUNK = 1 << 20  # bytes hashed at a time: memory stays bounded whatever the file


def stored_digest(path: Path, folder: Path | None = None,
                  error: type[NmtError] = DataError) -> str:
    """SHA-256 of a file of a cache, a run or an export (through :func:`open_stored`), read
    :data:`DIGEST_CHUNK` bytes at a time: at disk speed (with the SHA extensions most CPUs
    have, faster than BLAKE2b; docs/RELIABILITY.md gives the cost)."""
    digest = hashlib.sha256()
    buffer = bytearray(DIGEST_CHUNK)
    view = memoryview(buffer)
    with open_stored(path, folder, error) as f:
        try:
            while n := f.readinto(buffer):
                digest.update(view[:n])
        except OSError as e:
            raise error(f"{path}: cannot read ({os_reason(e)})") from None
    return digest.hexdigest()


def read_json(path: Path, error: type[NmtError], expected: str,
              folder: Path | None = None) -> Any:
    """The JSON value in the file ``path``, None when there is no such file; one that cannot be
    read (:func:`open_stored`: a FIFO, a device, a link out of ``folder``) or parsed (nested too
    deeply included) is ``error`` naming it and what was ``expected``."""
    if not os.path.lexists(path):
        return None
    data = read_stored_bytes(path, folder, error)
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as e:
        reason = "nested too deeply" if isinstance(e, RecursionError) else first_line(e, 120)
        raise error(f"{path}: unreadable ({reason}); expected {expected}") from None


def user_path(value: str | os.PathLike[str], where: str) -> Path:
    """A path as a user wrote it in a config or an environment variable, where no shell expanded
    ``~``: ``~`` and ``~user`` expanded here, in one place; a user without a home directory is
    one line naming ``where`` (the key or option), not Python's RuntimeError."""
    path = Path(value)
    if not str(value).startswith("~"):
        return path
    try:
        return path.expanduser()
    except RuntimeError:
        user = str(value).split("/", 1)[0][1:] or "the current user"
        raise NmtError(f"{where}: {value}: cannot expand ~ ({user} has no home directory "
                       "here); write the path out") from None


def atomic_write_bytes(path: Path, write: Any, where: str | None = None) -> None:
    """Call ``write(fileobj)`` on a temporary file beside ``path``, fsync, then rename over it.

    A crash at any moment leaves either the old file or the new one, never a partial file: the
    temporary file (``.NAME.XXXX.tmp``, hidden and not ending in ``.pt``) is removed on any
    failure, and a failure to write (disk full, read-only directory) is a one-line
    :class:`NmtError` naming ``path`` (or ``where``, what the user named it); the old file is
    left as it was.
    """
    where = where or str(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        held = _temporary_file(path)
        fd = os.open(held.path, os.O_WRONLY)
    except OSError as e:
        raise NmtError(f"{where}: cannot write ({os_reason(e)})") from None
    _mode_like_open(fd, path)
    raw = os.fdopen(fd, "wb")
    f = _RecordingWriter(raw)
    try:
        with raw:
            write(f)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(held.path, path)
    except BaseException as e:
        held.cleanup()
        # torch.save turns whatever its write raised (ENOSPC, even Ctrl-C) into a RuntimeError
        cause = e if isinstance(e, OSError) else f.error
        if cause is not None and not isinstance(cause, Exception):
            raise cause from None  # KeyboardInterrupt stays an interruption
        if isinstance(e, Exception) and isinstance(cause, OSError):
            raise NmtError(f"{where}: cannot write ({os_reason(cause)}); the previous "
                           "file, if any, is unchanged") from None
        raise
    held.cleanup()
    with suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # the rename itself survives a power cut
        finally:
            os.close(dir_fd)


class _RecordingWriter:
    """A binary file wrapper that remembers what a write raised."""

    def __init__(self, f: BinaryIO) -> None:
        self._f = f
        self.error: BaseException | None = None

    def write(self, data: Any) -> int:
        try:
            return self._f.write(data)
        except BaseException as e:
            self.error = e
            raise

    def flush(self) -> None:
        self._f.flush()

    def fileno(self) -> int:
        return self._f.fileno()

    def __getattr__(self, name: str) -> Any:  # seek, tell...: what writers check a file has
        return getattr(self._f, name)


def _mode_like_open(fd: int, path: Path) -> None:
    """Give the temporary file (mkstemp makes it 0600) the permissions ``open(path, "w")``
    would: those of the file it replaces, or 0666 less the umask."""
    try:
        mode = path.stat().st_mode & 0o7777
    except OSError:
        mode = umask_mode(0o666)
    with suppress(OSError):
        os.fchmod(fd, mode)


def umask_mode(mode: int) -> int:
    """``mode`` less the process's umask: what ``open`` (0o666) or ``mkdir`` (0o777) would give,
    for the files and directories ``mkstemp``/``mkdtemp`` make private (0600, 0700)."""
    umask = os.umask(0)
    os.umask(umask)
    return mode & ~umask


def make_dirs(path: Path, option: str = "") -> None:
    """``mkdir -p`` whose failure (a file in the way, no permission) is one line naming
    ``path`` (after ``option``, the command-line option it came from, when given)."""
    where = f"{option} {path}" if option else str(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise NmtError(f"{where}: expected a directory, but a file of that name is in the "
                       "way") from None
    except OSError as e:
        raise NmtError(f"{where}: cannot create the directory ({os_reason(e)})") from None


def real_path(path: Path, where: str) -> Path:
    """``path`` with its symbolic links, ``.`` and ``..`` resolved (it need not exist): where a
    write to it lands, whatever the spelling. A link loop is a one-line error after ``where``."""
    try:
        return path.resolve()
    except (OSError, RuntimeError) as e:  # RuntimeError: a link loop (Python before 3.13)
        raise NmtError(f"{where}: cannot resolve the path ({e})") from None


def replaceable_output(path: Path, where: str, overwrite: bool,
                       why_not_ours: Callable[[Path], str | None], ours: str) -> Path:
    """The real path to write the output ``path`` (a file or directory nmt writes as a whole) to,
    refusing to replace anything that is not nmt's own output.

    Refused, in one line starting with ``where`` (what the user named, e.g. ``--output DIR``):
    an existing ``path`` unless ``overwrite``; with it, a symbolic link (the link, not what it
    points to, would be replaced), the current directory, and whatever ``why_not_ours`` (called
    on the resolved path, which exists) gives a reason for; ``ours`` says what may be replaced.
    Every spelling of one path (``./x``, ``x/``, ``a/../x``, a link to a parent) gets the same
    answer, as the checks look at what is there, not at the name.
    """
    if os.path.lexists(path):
        if not overwrite:
            raise NmtError(f"{where}: already exists; choose another name or pass --overwrite")
        if path.is_symlink():
            raise NmtError(f"{where}: is a symbolic link; only {ours} is replaced, not a link "
                           "to one (name what it points to)")
    real = real_path(path, where)
    if real.exists() and real == real_path(Path.cwd(), where):
        raise NmtError(f"{where}: is the current directory; name a directory below it")
    reason = why_not_ours(real) if real.exists() else None
    if reason is not None:
        raise NmtError(f"{where}: {reason}; only {ours} is replaced")
    return real


# --- temporary files and folders --------------------------------------------------------------
#
# One rule for every temporary file or folder nmt writes (a cache being built, a download, a
# file being extracted or replaced, an export, an unpacked package): its writer holds an
# ``flock`` on it from the moment it exists until it is renamed into place or removed, and the
# next writer of the same kind removes those of its kind whose lock is free, the leftovers of a
# writer that was killed. The system releases the lock when the writer dies, however it dies;
# a live writer's lock is held, so its file or folder is never removed.


def _lock(fd: int, wait: bool) -> bool:
    """Take an exclusive ``flock`` on ``fd``: True when taken (always, where there is no
    ``fcntl``)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except OSError:
        return False
    return True


def remove_dead(directory: Path, kind: str) -> None:
    """Remove the temporary files and folders of ``directory`` matching the glob ``kind`` whose
    lock no writer holds (see :class:`Temporary`): what a killed writer left."""
    try:
        import fcntl  # noqa: F401
    except ImportError:  # pragma: no cover - without locks a live writer cannot be told apart
        return
    try:
        entries = list(directory.glob(kind))
    except OSError:
        return
    for entry in entries:
        try:  # not following a link, never waiting on a FIFO
            fd = os.open(entry, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue
        try:
            if not _lock(fd, wait=False):
                continue  # a live writer's
            held = os.fstat(fd)
            with suppress(OSError):
                if os.path.samestat(held, entry.lstat()):  # still the entry we locked
                    if stat.S_ISDIR(held.st_mode):
                        shutil.rmtree(entry, ignore_errors=True)
                    else:
                        entry.unlink()
        finally:
            os.close(fd)


class Temporary:
    """A temporary folder (or, with ``folder=False``, an empty file) in ``parent``, named
    ``PREFIX...SUFFIX`` and held by an ``flock`` while this object is open; the temporaries of
    its ``kind`` (a glob, by default ``PREFIX*SUFFIX``) that dead writers left are removed
    first (:func:`remove_dead`). :meth:`cleanup` (the end of a ``with`` block, or the object
    being collected) removes it unless it was renamed away, then lets the lock go.

    A folder is made with the umask's mode (``mkdtemp`` makes it 0700); a file is 0600 until
    its user gives it a mode. Raises ``OSError``: callers name the path the user gave."""

    def __init__(self, parent: Path, prefix: str, suffix: str = "", *, folder: bool = True,
                 kind: str | None = None) -> None:
        remove_dead(parent, kind or f"{glob.escape(prefix)}*{glob.escape(suffix)}")
        with held_signals.held():  # made and its removal registered, or neither
            self._make(parent, prefix, suffix, folder)
            self._finalizer = weakref.finalize(self, _release, self.path, self._fd)
            _held.add(self)

    def _make(self, parent: Path, prefix: str, suffix: str, folder: bool) -> None:
        while True:
            if folder:
                made = tempfile.mkdtemp(prefix=prefix, suffix=suffix, dir=parent)
            else:
                fd, made = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=parent)
                os.close(fd)
            try:
                if folder:
                    os.chmod(made, umask_mode(0o777))
                self._fd = os.open(made, os.O_RDONLY)
            except FileNotFoundError:  # taken for a dead writer's and removed before opened
                continue
            except OSError:
                with suppress(OSError):  # made (empty) but not held: nothing would remove it
                    (os.rmdir if folder else os.unlink)(made)
                raise
            _lock(self._fd, wait=True)  # held by a remover only if it is removing it
            with suppress(OSError):
                if os.path.samestat(os.fstat(self._fd), os.lstat(made)):
                    break
            os.close(self._fd)  # taken for a dead writer's and removed before it was held
        self.path = Path(made)
        self.name = made

    def cleanup(self) -> None:
        with held_signals.held():  # a finalizer runs once: a signal within would end it early
            self._finalizer()

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


# the Temporaries not yet cleaned up: removed by release_held when a command ends without the
# interpreter's teardown, which would run their finalizers (nmt.fast_exit)
_held: weakref.WeakSet[Temporary] = weakref.WeakSet()


def release_held() -> None:
    """Clean up every :class:`Temporary` still held, as the interpreter's exit would through
    their finalizers: those a Ctrl-C or SIGTERM left between their making and the ``try`` or
    ``with`` that cleans them up (:func:`nmt.fast_exit.end` calls it)."""
    for held in list(_held):
        held.cleanup()


def _release(path: Path, fd: int) -> None:
    """Remove a :class:`Temporary` unless it was renamed away (another inode at its name is
    not touched), then let its lock go. Called once (a finalizer): a signal waits for its end."""
    with held_signals.held():
        try:
            with suppress(OSError):
                if os.path.samestat(os.fstat(fd), path.lstat()):
                    if path.is_dir():
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        path.unlink()
        finally:
            os.close(fd)


def _temporary_file(path: Path) -> Temporary:
    """The held temporary file ``.NAME.XXXX.tmp`` beside ``path`` that a write of it is renamed
    from; those a killed writer of ``path`` left are removed first."""
    return Temporary(path.parent, f".{path.name}.", TMP_SUFFIX, folder=False)


def swap_in(new: Path, target: Path, aside: Path,
            put: Callable[[Path, Path], None] = os.replace) -> None:
    """Rename ``new`` to ``target``, the existing ``target`` first moved to ``aside`` (a path
    in a held temporary folder, removed with it), signals held between the two renames (a
    Ctrl-C there would leave neither); where ``new`` cannot be put (``put``), the old
    ``target`` is put back and the error raised. A ``target`` gone meanwhile is not missed."""
    with held_signals.held():
        with suppress(FileNotFoundError):
            os.replace(target, aside)
        try:
            put(new, target)
        except OSError:
            with suppress(OSError):  # the old one back, if it was moved
                os.replace(aside, target)
            raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, lambda f: f.write(text.encode("utf-8")))


def append_text(path: Path, text: str) -> None:
    """Append ``text`` (UTF-8) to ``path``, creating it (0666 less the umask) when missing.

    A symbolic link at ``path`` is refused rather than followed (a link planted in a run
    directory must not get another file appended to), and so is anything but a regular file (a
    FIFO, opened without blocking, would otherwise wait for a reader for ever); any failure
    (disk full, read-only directory) is a one-line :class:`NmtError` naming ``path``.
    """
    flags = (os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_NONBLOCK", 0))
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as e:
        if e.errno == errno.ELOOP or path.is_symlink():
            raise NmtError(f"{path}: is a symbolic link; refusing to write through it "
                           "(remove the link)") from None
        problem = path_problem(path)  # a FIFO without a reader (ENXIO), a directory
        raise NmtError(f"{path}: {problem or f'cannot write ({os_reason(e)})'}") from None
    _only_a_file(fd, path, NmtError)
    try:
        with os.fdopen(fd, "ab") as f:
            f.write(text.encode("utf-8"))
    except OSError as e:
        raise NmtError(f"{path}: cannot write ({os_reason(e)})") from None


@contextmanager
def atomic_text_output(path: Path) -> Iterator[TextIO]:
    """A UTF-8 text file to stream into, renamed over ``path`` only when the block succeeds.

    A failure or interruption midway (bad input line, Ctrl-C, full disk) leaves ``path`` as it
    was instead of half written. Paths that are not regular files (``/dev/stdout``, a named
    pipe) are written directly. Opening raises ``OSError`` so callers can name their option.
    """
    if path.exists() and not path.is_file():
        with path.open("w", encoding="utf-8", newline="\n") as f:
            yield f
        return
    held = _temporary_file(path)
    fd = os.open(held.path, os.O_WRONLY)
    _mode_like_open(fd, path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(held.path, path)
    finally:
        held.cleanup()


# --- reading text a line at a time ------------------------------------------------------------

# A line is read up to this many bytes (1 MiB): far beyond any sentence or the 1024 tokens
# translated, and a bound on what one line costs whatever the input
MAX_LINE_BYTES = 1 << 20
# (line number from 1, bytes read of it) -> None; for warnings about lines read in part
LongLineHook = Callable[[int, int], None]


class LineSource(Protocol):
    """What :func:`read_lines` reads: a binary file, or anything with its ``readline``."""

    def readline(self, size: int = -1, /) -> bytes: ...


def read_lines(stream: LineSource, name: str, on_long: LongLineHook | None = None,
               max_bytes: int = MAX_LINE_BYTES, long_as_empty: bool = False,
               on_end: Callable[[str], object] | None = None) -> Iterator[str]:
    """Lines of a byte stream as text, lazily, each read up to ``max_bytes`` bytes (its line
    end aside): memory stays bounded whatever the input, a stream with no line end at all
    included. A longer line is cut there (at a character boundary) and the rest of it skipped,
    reported to ``on_long``; without ``on_long`` it is a :class:`DataError` naming the line.
    ``long_as_empty``: a longer line is read as ``""`` instead of cut (a corpus line: its pair
    is then dropped as empty, and a file aligned with this one stays aligned).
    ``on_end`` is given each line's end as written, before the line is yielded: ``"\r\n"``,
    ``"\n"``, or ``""`` for a last line without one (a translation keeps its source's).

    Invalid UTF-8 is a :class:`DataError` naming the line, and so is a failing read. NUL bytes
    (binary junk, UTF-16 files read as bytes) become spaces, which normalisation then drops; a
    UTF-8 byte-order mark is dropped by normalisation too.
    """
    number = 0
    while True:
        raw = _read(stream, name, number + 1, max_bytes + 1)
        if not raw:
            return
        number += 1
        long = False
        end = _line_end(raw)
        if len(raw) > max_bytes and not raw.endswith(b"\n"):
            rest = _read(stream, name, number, max_bytes)
            long = not (raw.endswith(b"\r") and rest in (b"\n", b""))  # else a CRLF line end
            tail = raw[-1:] + rest
            while rest and not rest.endswith(b"\n"):  # skipped a piece at a time
                rest = _read(stream, name, number, max_bytes)
                tail = tail[-1:] + rest
            end = _line_end(tail)
        if on_end is not None:
            on_end(end)
        if long:
            if on_long is None:
                raise DataError(f"{name}: line {number}: longer than {max_bytes:,} bytes; "
                                "expected one sentence per line")
            on_long(number, max_bytes)
            if long_as_empty:
                yield ""
                continue
            raw = raw[:max_bytes]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            if long and e.end == len(raw) and e.reason == "unexpected end of data":
                text = raw[: e.start].decode("utf-8")  # the cut fell inside a character
            else:
                raise DataError(
                    f"{name}: line {number}: not valid UTF-8 (byte {e.start + 1} of the line); "
                    "convert the file to UTF-8"
                ) from None
        # a NUL is no text: a run of them separates words, as one space, and ends nothing
        yield _NULS.sub(" ", text.rstrip("\r\n").strip("\x00"))


_NULS = re.compile("\x00+")


def _line_end(raw: bytes) -> str:
    return "\r\n" if raw.endswith(b"\r\n") else "\n" if raw.endswith(b"\n") else ""


def _read(stream: LineSource, name: str, number: int, size: int) -> bytes:
    """At most ``size`` bytes of the current line; a failing read is one line naming it."""
    try:
        return stream.readline(size)
    except OSError as e:
        raise DataError(f"{name}: line {number}: cannot read ({os_reason(e)})") from None
