"""Long native calls that Ctrl-C and SIGTERM still stop.

Python runs a signal's handler only between bytecodes, so while a C++ library works inside one
call (SentencePiece training a vocabulary on a large corpus can take minutes) Ctrl-C and
``kill`` wait for it to return. :func:`call` runs such a function in a child process and waits
for it in Python: a signal in the parent interrupts the wait, the child is killed, and the
parent goes on as it would have (``KeyboardInterrupt``, nmt's ``Terminated``).

The child is a fresh interpreter (``python -m nmt.stoppable``) that reads the pickled function
and arguments on its standard input and writes the pickled answer on its standard output. Not a
fork of the caller, which may hold torch's threads (a child forked while one of them held a lock
waits on it for ever, as the test suite once did); and not multiprocessing's spawn or fork
server, which import the caller's main module again in the child, running a script written
without ``if __name__ == "__main__":`` twice. The function must be importable (a module's), and
the child sees the caller's ``sys.path``. Starting it costs about a tenth of a second.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from nmt import held_signals
from nmt.errors import NmtError

T = TypeVar("T")


class ChildFailed(NmtError):
    """The child ended without an answer (killed by the system, out of memory)."""


def call(fn: Callable[..., T], *args: Any, what: str = "a native call") -> T:
    """``fn(*args)`` in a child process: its value, or its exception raised here. A signal that
    raises here (Ctrl-C, SIGTERM under ``nmt``) kills the child first; a child that dies
    without answering is a :class:`ChildFailed` naming ``what``."""
    payload = pickle.dumps((fn, args), protocol=pickle.HIGHEST_PROTOCOL)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    with held_signals.children_ignore_ctrl_c():  # Ctrl-C is the parent's: it kills the child
        child = subprocess.Popen([sys.executable, "-m", "nmt.stoppable"], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, env=env)
    try:
        answer, _ = child.communicate(payload)  # waits in Python: signal handlers run
    except BaseException:
        child.kill()
        child.wait()
        raise
    try:
        ok, value = pickle.loads(answer)
    except Exception:  # noqa: BLE001 - nothing, or a cut answer: the child died
        raise ChildFailed(f"{what}: its process ended without an answer (exit status "
                          f"{child.returncode}; out of memory?)") from None
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


def _die_with_parent() -> None:
    """On Linux, the child is killed when its parent dies, SIGKILL included (which the parent
    cannot pass on): no orphan keeps training a vocabulary for nobody."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent was gone before that took effect
        os._exit(1)


def _serve() -> None:
    """The child: one call read from stdin, its answer written to stdout."""
    held_signals.ignore_ctrl_c()
    _die_with_parent()
    fn, args = pickle.loads(sys.stdin.buffer.read())
    try:
        answer: tuple[bool, Any] = (True, fn(*args))
    except Exception as e:  # noqa: BLE001 - carried to the parent and raised there
        answer = (False, e)
    try:
        data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):  # an exception pickle refuses
        data = pickle.dumps((False, RuntimeError(f"{type(answer[1]).__name__}: {answer[1]}")))
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    _serve()
