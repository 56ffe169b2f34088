"""Ending a translating command without the interpreter's teardown.

Once torch is loaded, Python's own clean-up at exit (freeing every module's objects, the
destructors of torch's libraries) takes about half a second on two cores: a fifth of
``nmt translate "I'm home."`` through PyTorch (docs/BENCHMARKS.md, "Starting a command"). A
command that only reads a model and writes text (``translate``, ``bleu``, ``attention``) holds
nothing that needs it: nmt registers no exit callbacks, and every file it writes is closed (and
renamed into place) before the command returns. Such a command calls :func:`allow` and, once it
has returned, :func:`end` does what the interpreter would (flush logging's handlers and the
standard streams, remove the temporary files still held, which a Ctrl-C or SIGTERM can leave
between their making and their clean-up being in place) and ends the process with the
command's exit status. Training never allows it (its worker processes, compiled kernels and
process groups are torn down the ordinary way).
"""

from __future__ import annotations

import os
import sys

_allowed = False


def allow() -> None:
    """Called by a command that may end without the interpreter's teardown."""
    global _allowed
    _allowed = True


def end(code: int) -> None:
    """When a command allowed it: flush, then end the process now with ``code``. Otherwise
    return (the caller exits the ordinary way)."""
    if not _allowed:
        return
    logging = sys.modules.get("logging")  # imported by someone: its handlers may hold lines
    if logging is not None:
        logging.shutdown()
    files = sys.modules.get("nmt.files")  # imported: temporary files may still be held
    if files is not None:
        files.release_held()  # what their finalizers would do at the interpreter's exit
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            try:
                stream.flush()
            except (OSError, ValueError):  # a full disk or a closed pipe: what exit would say
                return
    os._exit(code)
