"""Lines that arrive as they are typed or sent (nmt/translation/arriving.py): each is translated
as it comes, read exactly as a file's lines are, and a chunk of them ends only where the input
pauses."""

from __future__ import annotations

import io
import os
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_decode import make_run

import nmt.translation.arriving as arriving
from nmt.api import open_translator, translate_lines
from nmt.translation.arriving import Arriving, LineReader, pauses
from nmt.translation.translator import chunks


class Pipe:
    """A pipe whose write end a test may close (for the end of the input) once."""

    def __init__(self) -> None:
        self.r, self.w = os.pipe()
        self.open = [self.r, self.w]

    def close_write(self) -> None:
        if self.w in self.open:
            self.open.remove(self.w)
            os.close(self.w)


@pytest.fixture()
def pipe() -> Iterator[Pipe]:
    p = Pipe()
    yield p
    for fd in p.open:
        os.close(fd)


@settings(max_examples=200, deadline=None)
@given(content=st.binary(max_size=300) | st.lists(
           st.sampled_from([b"a", b"bc", b"\n", b"\r\n", b"\x00", "é".encode()]),
           max_size=60).map(b"".join),
       sizes=st.lists(st.integers(min_value=-1, max_value=12), min_size=1, max_size=80),
       read=st.integers(min_value=1, max_value=9))
def test_a_line_reader_reads_as_a_file_does(content: bytes, sizes: list[int], read: int) -> None:
    """``LineReader.readline(size)`` gives what a file's ``readline(size)`` gives, call for call,
    whatever its reads take at a time (here 1-9 bytes)."""
    r, w = os.pipe()
    try:
        os.write(w, content)
        os.close(w)
        with pytest.MonkeyPatch.context() as m:
            m.setattr(arriving, "READ", read)
            reader, file = LineReader(r), io.BytesIO(content)
            for size in sizes * 10:
                assert reader.readline(size) == file.readline(size)
    finally:
        os.close(r)


def _within(seconds: float, take: Callable[[], list[str] | None]) -> list[str] | None:
    """``take()``, which must return within ``seconds`` (a chunk waiting for more input would
    not: the test fails instead of hanging)."""
    got: list[list[str] | None] = []
    waiting = threading.Thread(target=lambda: got.append(take()), daemon=True)
    waiting.start()
    waiting.join(seconds)
    assert got, "the chunk waits for more input"
    return got[0]


def test_a_chunk_ends_where_the_input_pauses_not_at_each_line(pipe: Pipe) -> None:
    r, w = pipe.r, pipe.w
    lines = Arriving(os.fdopen(r, "rb", buffering=0, closefd=False), "stdin")
    os.write(w, b"one\ntwo\nthree\n")  # sent together: one chunk
    chunked = chunks(lines, 2048, 1 << 22)
    assert _within(20, lambda: next(chunked)) == ["one", "two", "three"]
    os.write(w, b"four\n")
    assert _within(20, lambda: next(chunked)) == ["four"]
    os.write(w, b"five\nsix")  # the last line without its end
    pipe.close_write()
    assert _within(20, lambda: next(chunked)) == ["five", "six"]
    assert _within(20, lambda: next(chunked, None)) is None


def test_a_file_does_not_pause_and_a_pipe_does(tmp_path: Path, pipe: Pipe) -> None:
    (tmp_path / "f").write_bytes(b"a\n")
    with open(tmp_path / "f", "rb") as f:
        assert not pauses(f)
    with os.fdopen(pipe.r, "rb", closefd=False) as p:
        assert pauses(p)
    assert not pauses(io.BytesIO(b"a\n"))


@pytest.mark.parametrize("through", ["stdin", "a FIFO as --input"])
def test_a_program_that_waits_for_each_translation_gets_it(
        tmp_path: Path, pipe: Pipe, monkeypatch: pytest.MonkeyPatch, through: str) -> None:
    """A program that sends a line on nmt's stdin (or a FIFO given as ``--input``) and reads its
    translation before sending the next, as a localisation tool drives a translator: each
    translation comes while the input is still open, the same as the lines translated at once.
    Before, nmt waited for 2,048 lines or the end of the input, and the program for nmt, for
    ever."""
    run = make_run(tmp_path / "run")
    translator = open_translator(run, device="cpu")
    sentences = ["a b c .", "d e", "", "f g h i ."]
    expected = translate_lines(translator, sentences)
    assert expected is not None
    fifo = tmp_path / "fifo"
    if through == "stdin":
        monkeypatch.setattr(sys, "stdin", os.fdopen(pipe.r, "r", closefd=False))
    else:
        os.mkfifo(fifo)
    got: list[str] = []
    came = threading.Semaphore(0)

    class Out(io.StringIO):
        def write(self, text: str) -> int:
            got.append(text)
            came.release()
            return len(text)

    failed: list[BaseException] = []

    def translate() -> None:
        try:
            translate_lines(translator, stream=Out(),
                            input=fifo if through != "stdin" else None)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            failed.append(e)

    worker = threading.Thread(target=translate, daemon=True)
    worker.start()
    w = pipe.w if through == "stdin" else os.open(fifo, os.O_WRONLY)  # once nmt opened it
    try:
        for sentence in sentences:
            os.write(w, sentence.encode() + b"\n")
            assert came.acquire(timeout=30), f"no translation of {sentence!r} while it waited"
    finally:
        if through == "stdin":
            pipe.close_write()
        else:
            os.close(w)
        worker.join(60)
    assert not failed and not worker.is_alive()
    assert got == [t + "\n" for t in expected]
