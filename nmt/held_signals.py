"""Ctrl-C and SIGTERM held back for a few steps that must happen together; child processes
that leave Ctrl-C to the process that started them.

nmt turns both signals into exceptions (``KeyboardInterrupt``, :class:`nmt.process.Terminated`)
so that a write in progress cleans up after itself. A few steps leave nothing to clean up by
if such an exception comes between them: a temporary file made but its removal not yet
registered, an old export moved aside but the new one not yet in its place. :func:`held` runs
such steps with both signals noted instead of handled, then puts their handlers back and
raises each signal that came, so that it is handled as it would have been, once the steps are
done.

Python handles signals in the main thread only (and blocking them there does not hold them:
another thread, torch's or OpenMP's, takes them), so it is the handlers that are swapped, and
in another thread the steps run as they are.

Ctrl-C at a terminal goes to every process of its group: nmt's children too (the workers that
judge a large corpus' pairs, the child of :mod:`nmt.stoppable`). The command stops them itself
when it stops; a child interrupted on its own printed a traceback, and a worker interrupted
with results unsent could keep the command from ever ending. So a child is started inside
:func:`children_ignore_ctrl_c` and calls :func:`ignore_ctrl_c` first: it never acts on Ctrl-C,
from its first instruction.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

HELD = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def children_ignore_ctrl_c() -> Iterator[None]:
    """Start child processes in this block: SIGINT is blocked in this thread, and a child
    inherits the mask, so it cannot act on Ctrl-C before it calls :func:`ignore_ctrl_c`. A
    Ctrl-C that comes meanwhile waits for the block's end (or another thread takes it), then
    raises here as ever."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def ignore_ctrl_c() -> None:
    """In a child started in :func:`children_ignore_ctrl_c`: Ctrl-C ignored from now on."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@contextmanager
def held() -> Iterator[None]:
    """Run the block with Ctrl-C and SIGTERM held: see the module docstring."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []
    handlers: dict[int, Any] = {}
    try:
        for signum in HELD:  # a signal already pending is handled as before: nothing made yet
            handler = signal.getsignal(signum)
            if handler is None:  # a handler set outside Python: left alone
                continue
            handlers[signum] = handler  # before the change: a signal may come as it returns
            signal.signal(signum, lambda signum, frame: came.append(signum))
        yield
    finally:
        first = _put_back(handlers)
        if first is not None:
            raise first
        for number in dict.fromkeys(came):  # each signal once, in the order they came
            signal.raise_signal(number)


def _put_back(handlers: dict[int, Any]) -> BaseException | None:
    """Put each signal's handler back. Python handles a pending signal before it changes a
    handler (and then leaves it unchanged): one that came for a handler already put back
    raises here; it is kept, the change made again, and the first such raised is returned."""
    first: BaseException | None = None
    for signum, handler in handlers.items():
        for _ in range(8):  # each failed try handled a signal that came: a few at most
            try:
                signal.signal(signum, handler)
                break
            except BaseException as e:  # a signal's own exception (KeyboardInterrupt...)
                first = first or e
    return first
