"""How a one-line error quotes an exception raised inside a library."""

from __future__ import annotations

import pytest
import torch

from nmt.errors import first_line


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
