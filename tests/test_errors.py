"""How a one-line error quotes an exception raised inside a library, and a value it names."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from nmt.errors import first_line, named, shown


def test_first_line_keeps_the_first_line_of_a_long_message() -> None:
    error = RuntimeError("  Error(s) in loading state_dict for Transformer:\n\tMissing key(s): a\n")
    assert first_line(error) == "Error(s) in loading state_dict for Transformer:"


def test_first_line_is_cut_to_the_limit() -> None:
    assert first_line(ValueError("x" * 500)) == "x" * 160
    assert first_line(ValueError("abcdef"), limit=3) == "abc"


@pytest.mark.parametrize("message", ["", "  \n "])
def test_an_empty_message_is_named_by_its_type(message: str) -> None:
    assert first_line(OverflowError(message)) == "OverflowError"


def test_a_real_torch_error_gives_one_line() -> None:
    model = torch.nn.Linear(2, 2)
    with pytest.raises(RuntimeError) as caught:
        model.load_state_dict({"weight": torch.zeros(3, 3)})
    assert "\n" in str(caught.value)  # torch's message runs to several lines
    line = first_line(caught.value)
    assert line and "\n" not in line and line in str(caught.value)


@given(st.one_of(st.text(), st.binary(), st.integers(), st.floats(), st.lists(st.text())),
       st.integers(2, 80))
def test_a_value_shown_in_an_error_is_one_line_cut_where_it_says(value: object,
                                                                 width: int) -> None:
    """What an error quotes never breaks its one line: no line break or trailing space, at most
    ``width`` characters, and ``…`` where it was cut (a cut ``'abc`` read as the whole)."""
    text = shown(value, width)
    assert text.isprintable() and text == text.rstrip()
    assert len(text) <= width
    assert text == repr(value) or text.endswith("…")


def test_a_value_shown_whole_or_cut_golden() -> None:
    assert shown("cpu") == "'cpu'"
    assert shown("a b" + " " * 80, 6) == "'a b…"  # not "'a b  " (one line ends with a space)


def test_a_name_read_from_a_file_is_shown_as_written_unless_it_would_break_the_line() -> None:
    assert named("fra-eng/fra.txt") == "fra-eng/fra.txt"
    assert named("a\nb.txt") == "'a\\nb.txt'"
    assert named(" x") == "' x'"  # a space at an end would be lost to the eye
    assert named("x" * 200, 20) == "'" + "x" * 18 + "…"


def test_an_os_error_while_an_interruption_unwinds_is_the_interruption() -> None:
    """write_errors: a clean-up that fails because of where Ctrl-C came (shutil.rmtree closing a
    descriptor it had closed) is the interruption again, not `cannot write (Bad file
    descriptor)`; an OSError of its own is still one line naming the target."""
    from nmt.errors import NmtError, write_errors

    def clean_up_failing() -> None:
        try:
            raise KeyboardInterrupt
        finally:
            raise OSError(9, "Bad file descriptor")

    with pytest.raises(KeyboardInterrupt), write_errors("--output out.txt"):
        clean_up_failing()
    with pytest.raises(NmtError, match=r"^--output out.txt: cannot write \(Bad file descriptor"):
        with write_errors("--output out.txt"):
            raise OSError(9, "Bad file descriptor")
