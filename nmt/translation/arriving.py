"""Lines that arrive as they are typed or sent: a terminal, or a program that writes a line and
waits for its translation.

A stream is translated in chunks of up to :data:`~nmt.translation.translator.CHUNK_LINES`
lines, which the decoder sorts into batches by length. Read from a terminal (``nmt translate
-i -``) or from a program that sends a line and reads the answer before sending the next, a
chunk waited for 2,048 lines or the end of the input: nothing was translated before Ctrl-D, and
such a program and nmt waited for each other for ever. :class:`Arriving` reads such a stream
itself (not through ``sys.stdin``'s buffer, whose content cannot be seen), so it knows whether a
whole line is already read; a chunk ends where the input pauses: no whole line read and
nothing readable within :data:`PAUSE` seconds. A file, or a pipe that keeps up, still fills
whole chunks, and chunks do not change translations (batched = one by one).
"""

from __future__ import annotations

import os
import select
import stat
from collections.abc import Callable, Iterator
from typing import BinaryIO

from nmt.files import LongLineHook, read_lines

PAUSE = 0.05  # seconds without a new line that end a chunk (unnoticed by someone typing)
READ = 1 << 16  # bytes a read asks for


def pauses(stream: BinaryIO) -> bool:
    """Whether ``stream`` is one that may pause between lines: a terminal, a pipe, a socket
    (not a regular file, whose lines are all there)."""
    try:
        mode = os.fstat(stream.fileno()).st_mode
    except (OSError, ValueError, AttributeError):  # no descriptor behind it
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class LineReader:
    """``readline`` over a file descriptor, with a buffer of its own: what
    :func:`nmt.files.read_lines` reads, and :meth:`line_waiting` looks into."""

    def __init__(self, fd: int, buffered: bytes = b"") -> None:
        self._fd = fd
        self._buffer = bytearray(buffered)  # read from ``fd`` before, not yet given
        self._searched = 0  # bytes of the buffer known to hold no line end
        self._ended = False

    def readline(self, size: int = -1) -> bytes:
        """The next line with its end, or its first ``size`` bytes (``io``'s ``readline``)."""
        while True:
            end = self._buffer.find(b"\n", self._searched)
            if end >= 0 and (size < 0 or end < size):
                return self._take(end + 1)
            if 0 <= size <= len(self._buffer):
                return self._take(size)
            if self._ended:
                return self._take(len(self._buffer))
            self._searched = len(self._buffer)
            data = os.read(self._fd, READ)
            self._ended = not data
            self._buffer += data

    def line_waiting(self, timeout: float) -> bool:
        """Whether a line (or the end of the input) is already read, or something can be read
        within ``timeout`` seconds."""
        if self._ended or b"\n" in self._buffer:
            return True
        return bool(select.select([self._fd], [], [], timeout)[0])

    def _take(self, n: int) -> bytes:
        line = bytes(self._buffer[:n])
        del self._buffer[:n]
        self._searched = 0
        return line


class Arriving:
    """The lines of a stream that may pause (:func:`pauses`), as :func:`nmt.files.read_lines`
    gives them, and :meth:`more_at_once`, by which a chunk of them ends where the input
    pauses."""

    def __init__(self, stream: BinaryIO, name: str, on_long: LongLineHook | None = None,
                 on_end: Callable[[str], object] | None = None, buffered: bytes = b"") -> None:
        """``buffered``: what was read from ``stream``'s descriptor and not yet taken (the
        bytes its buffer holds); ``stream`` itself is not read from again."""
        self._reader = LineReader(stream.fileno(), buffered)
        self._lines = read_lines(self._reader, name, on_long=on_long, on_end=on_end)

    def __iter__(self) -> Iterator[str]:
        return self._lines

    def more_at_once(self) -> bool:
        """Whether the next line comes at once (within :data:`PAUSE` seconds)."""
        return self._reader.line_waiting(PAUSE)
