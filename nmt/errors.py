"""Errors the user can act on. The CLI prints them as one line and exits non-zero, no traceback."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class NmtError(Exception):
    """A failure caused by input, files or environment, with a message that says what to do."""

    exit_code = 1


class ConfigError(NmtError):
    """A config file or ``--set`` override is invalid (message names file, key and expectation)."""

    exit_code = 2


class DataError(NmtError):
    """The corpus, an archive or a text input is missing or not what was expected."""


class CheckpointError(NmtError):
    """A run directory or checkpoint is missing, corrupt, untrusted or incompatible."""


def os_reason(e: OSError) -> str:
    """What an ``OSError`` says, without its errno number and path: "No space left on device"."""
    return e.strerror or str(e) or type(e).__name__


def shown(value: object, width: int = 60) -> str:
    """``value`` as a message quotes it: its ``repr`` (on one line, its control characters
    escaped), cut to ``width`` characters with ``…`` where it is cut, never ending in a
    space."""
    text = repr(value)
    return text if len(text) <= width else text[:max(width - 1, 1)].rstrip() + "…"


def named(name: str, width: int = 80) -> str:
    """A name read from a file or folder (an archive's entry, a folder's file) as a message
    names it: as written when it is printable, without spaces at its ends, and not longer than
    ``width``; else as :func:`shown` quotes it (``'a\\nb.txt'``), so that it never breaks
    the message's one line."""
    plain = name.isprintable() and name == name.strip() and 0 < len(name) <= width
    return name if plain else shown(name, width)


def first_line(error: BaseException, limit: int = 160) -> str:
    """The first line of ``error``'s message, cut to ``limit`` characters, or its type's name when
    the message is empty: how a one-line error quotes an exception from a library (torch's and
    CTranslate2's messages run to many lines)."""
    lines = str(error).strip().splitlines()
    return lines[0].strip()[:limit] if lines else type(error).__name__


@contextmanager
def write_errors(target: str) -> Iterator[None]:
    """Turn an ``OSError`` raised while writing ``target`` (an option and its file, or
    "standard output") into one line: ``TARGET: cannot write (No space left on device)``. A
    reader that went away (EPIPE) is left to the command line, which exits quietly. An
    ``OSError`` raised while a Ctrl-C or SIGTERM was unwinding (a clean-up that failed because
    of where the signal came) is that interruption again, not an error to report."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as e:
        if isinstance(e.__context__, BaseException) and not isinstance(e.__context__,
                                                                        Exception):
            raise e.__context__ from None
        raise NmtError(f"{target}: cannot write ({os_reason(e)})") from None
