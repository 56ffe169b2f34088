"""The nmt process, around whichever command it runs: its start (standard streams it was started
without, SIGTERM raised where the command is) and its end (without the interpreter's teardown
where :mod:`nmt.fast_exit` allows it, a Ctrl-C during the clean-up quiet, an unwritable stdout
reported once)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable

from nmt import fast_exit


class Terminated(BaseException):
    """SIGTERM, raised where the command is (as Ctrl-C raises ``KeyboardInterrupt``), so that a
    write in progress removes its temporary file and leaves the old file as it was, instead of
    the process vanishing with the temporary file left behind. ``nmt train`` takes SIGTERM
    over with its own handler while it trains (stop after the step, save ``last.pt``)."""


def raise_terminated(signum: int, frame: object) -> None:
    raise Terminated


def run(command: Callable[[], None]) -> None:
    """Run ``command`` (the command line) as the whole process: see the module docstring."""
    _hold_closed_standard_streams()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, raise_terminated)
    try:
        command()
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            fast_exit.end(e.code or 0)
        raise
    else:
        fast_exit.end(0)
    finally:
        _drop_unwritable_stdout()
        _quiet_interrupt_at_exit()


def _quiet_interrupt_at_exit() -> None:
    """From here on only the interpreter's clean-up runs (the atexit callbacks of torch, tqdm,
    matplotlib, logging, ...): a Ctrl-C now ends the process at once with status 130, as one
    during the command does, instead of Python's ``Exception ignored in atexit callback``
    traceback and the command's own status."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, lambda signum, frame: os._exit(128 + signum))


def _hold_closed_standard_streams() -> None:
    """Open the null device on whichever of descriptors 0-2 nmt was started without (``<&-``,
    ``>&-``), so that no file nmt opens later takes that number and receives what is meant for
    the terminal. Python has already set ``sys.stdin``/``sys.stdout``/``sys.stderr`` to None
    for them: commands that need the stream say so in one line."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            with contextlib.suppress(OSError):
                opened = os.open(os.devnull, os.O_RDWR)  # the lowest free number: fd
                if opened != fd:
                    os.close(opened)


def _drop_unwritable_stdout() -> None:
    """When stdout cannot take what is left in its buffer (a full disk, /dev/full), point it at
    the null device, so the interpreter's own flush at exit adds no second report."""
    if sys.stdout is None:  # closed when nmt started
        return
    try:
        sys.stdout.flush()
    except OSError:
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
