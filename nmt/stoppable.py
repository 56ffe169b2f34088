"""Long native calls that Ctrl-C and SIGTERM still stop.

Python runs a signal's handler only between bytecodes, so while a C++ library works inside one
call (SentencePiece training a vocabulary on a large corpus can take minutes) Ctrl-C and
``kill`` wait for it to return. :func:`call` runs such a function in a child process and waits
for it in Python, a tenth of a second at a time: a signal in the parent interrupts the wait,
the child is killed, and the parent goes on as it would have (``KeyboardInterrupt``, nmt's
``Terminated``).

The children come from multiprocessing's fork server: a process started clean (executed, not
forked) on the first call, with the modules named in ``preload`` imported, from which each child
is forked. Forking the caller itself is not safe: it may hold torch's and other libraries'
threads, and a child forked while one of them held a lock waits on it for ever (seen in the test
suite). The function and its arguments travel pickled.
"""

from __future__ import annotations

import multiprocessing
import pickle
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from nmt.errors import NmtError

T = TypeVar("T")
POLL_SECONDS = 0.1
_preloaded: set[str] = set()  # what the fork server is asked to import (when it starts)


class ChildFailed(NmtError):
    """The child ended without an answer (killed by the system, out of memory)."""


def _child(conn: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    try:
        answer: tuple[bool, Any] = (True, fn(*args))
    except BaseException as e:  # noqa: BLE001 - carried to the parent and raised there
        answer = (False, e)
    try:
        conn.send(answer)
    except (pickle.PicklingError, TypeError, AttributeError):  # an exception pickle refuses
        conn.send((False, RuntimeError(f"{type(answer[1]).__name__}: {answer[1]}")))
    conn.close()


def call(fn: Callable[..., T], *args: Any, what: str = "a native call",
         preload: Sequence[str] = ()) -> T:
    """``fn(*args)`` in a child process: its value, or its exception raised here. A signal that
    raises here (Ctrl-C, SIGTERM under ``nmt``) kills the child first; a child that dies
    without answering is a :class:`ChildFailed` naming ``what``. ``preload``: modules the fork
    server imports when it starts (the one holding ``fn``), so that no child imports them."""
    if "forkserver" not in multiprocessing.get_all_start_methods():  # not POSIX: in-process
        return fn(*args)
    context = multiprocessing.get_context("forkserver")
    if preload:
        context.set_forkserver_preload(sorted(set(_preloaded) | set(preload)))
        _preloaded.update(preload)
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(send, fn, args), daemon=True)
    child.start()
    send.close()
    try:
        while not receive.poll(POLL_SECONDS):  # Python between waits: handlers run
            if not child.is_alive() and not receive.poll(0):
                raise ChildFailed(f"{what}: its process ended without an answer (exit status "
                                  f"{child.exitcode}; out of memory?)")
        ok, value = receive.recv()
    except EOFError:
        raise ChildFailed(f"{what}: its process ended without an answer") from None
    except BaseException:
        child.kill()
        raise
    finally:
        receive.close()
        child.join()
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]
