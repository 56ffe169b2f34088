"""The Python API is as strict as the command line: every argument of the wrong type or out of
range is a TypeError or a one-line NmtError naming the parameter, raised before any model loads;
one string is never read as a list of sentences (or of paths)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nmt import api
from nmt.errors import CheckpointError, NmtError

NOPE = "no-such-run-dir"  # a run that does not exist: a call that got past its checks says so

BAD = {
    "count": st.one_of(st.integers(max_value=0), st.integers(min_value=2**31),
                       st.text(max_size=4), st.floats(), st.booleans(), st.just(b"4"),
                       st.just([4])),
    "text": st.one_of(st.integers(), st.floats(), st.just(b"x"), st.just(["best"]),
                      st.booleans()),
    "flag": st.one_of(st.integers(), st.text(max_size=4), st.none(), st.just([True])),
    "path": st.one_of(st.integers(), st.floats(), st.just(b"p"), st.just(["p"]), st.just(""),
                      st.booleans()),
}
OPEN = {"beam": "count", "batch_size": "count", "max_tokens": "count",
        "max_src_tokens": "count", "checkpoint": "text", "device": "text",
        "compute_type": "text", "averaged": "flag", "run": "path", "model": "path"}
SCORE = {"beam": "count", "batch_size": "count", "max_tokens": "count", "averaged": "flag",
         "checkpoint": "text", "src": "path", "data_dir": "path", "textbook_input": "flag"}
EXPORT = {"to": "text", "checkpoint": "text", "output": "path", "overwrite": "flag",
          "score_first": "flag", "data_dir": "path"}


def refused(call: Any, name: str) -> None:
    with pytest.raises((TypeError, NmtError)) as caught:
        call()
    message = str(caught.value)
    assert not isinstance(caught.value, CheckpointError), message  # it never got to the run
    assert message.startswith((f"{name}: ", f"{name}[")) and "\n" not in message, message


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_open_translator_refuses_bad_arguments_naming_them(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(OPEN)))
    value = data.draw(BAD[OPEN[name]])
    args = {"run": NOPE, name: value}
    refused(lambda: api.open_translator(**args), name)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_score_refuses_bad_arguments_naming_them(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(SCORE)))
    value = data.draw(BAD[SCORE[name]])
    refused(lambda: api.score(NOPE, **{name: value}), name)


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_export_refuses_bad_arguments_naming_them(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(EXPORT)))
    value = data.draw(BAD[EXPORT[name]])
    refused(lambda: api.export(NOPE, **{name: value}), name)


@pytest.mark.parametrize(("name", "value", "says"), [
    ("split", "bogus", "split: expected one of train, valid, test"),
    ("split", None, "split: expected one of"),
    ("refs", "ref.fr", "refs: expected a list of paths, got one ('ref.fr')"),
    ("refs", Path("ref.fr"), "refs: expected a list of paths, got one"),
    ("refs", [None], "refs[0]: expected a path"),
    ("refs", {"ref.fr": 1}, "refs: expected a list of paths, got a mapping"),
    ("refs", {"ref.fr"}, "refs: expected a list of paths, got a set"),
    ("limit", -1, "limit: expected a count >= 0"),
])
def test_score_refuses_what_it_would_misread(name: str, value: Any, says: str) -> None:
    refused(lambda: api.score(NOPE, **{name: value}), name)
    import re

    with pytest.raises((TypeError, NmtError), match=re.escape(says)):
        api.score(NOPE, **{name: value})


@pytest.mark.parametrize("sentences", ["I'm home.", b"Hi.", [None], ["Hi.", 5], 5,
                                       [b"Hi."], {"Hi.": 1}, {"Hi.", "Go."},
                                       frozenset({"Hi."})])
def test_translate_lines_never_reads_a_string_as_sentences(sentences: Any) -> None:
    opened: list[int] = []

    def open_it() -> Any:  # the model: never opened for arguments that are refused
        opened.append(1)
        raise AssertionError("opened")

    with pytest.raises(TypeError, match=r"^sentences(\[\d+\])?: expected"):
        api.translate_lines(open_it, sentences)
    assert not opened


def test_a_translator_refuses_a_string(tmp_path: Path) -> None:
    from test_decode import make_run

    from nmt.runs.loading import load_run
    from nmt.translation.translator import Translator

    translator = Translator.from_run(load_run(make_run(tmp_path / "run"), "best", "cpu"))
    for bad in ("Hi.", None, [None], b"Hi.", 5, {"Hi.": 1}, {"Hi."}):
        with pytest.raises(TypeError, match=r"^texts(\[\d+\])?: expected"):
            translator.translate(bad)
    assert translator.translate(("a b", "c")) == translator.translate(["a b", "c"])
    with pytest.raises(TypeError, match="translator: expected a translator"):
        api.translate_lines(5, ["a"])  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "value"), [("seed", 2**32), ("seed", -1), ("seed", True),
                                             ("seed", 1.0), ("beam", 0), ("beam", 2**31),
                                             ("search", "topk"), ("top_k", -1)])
def test_backtranslate_refuses_bad_arguments_naming_them(name: str, value: Any) -> None:
    refused(lambda: api.backtranslate(NOPE, input="mono.txt", output="bt", **{name: value}), name)


def test_a_seed_has_the_bound_of_the_command_line() -> None:
    """The largest seed --seed takes is the largest the API takes: it gets past the checks."""
    from nmt.config import int_limit

    with pytest.raises(NmtError, match="mono.txt: file not found"):
        api.backtranslate(NOPE, input="mono.txt", output="bt", seed=int_limit("train.seed"))


def test_messages_name_the_api_s_parameters_and_the_command_line_s_options(
        tmp_path: Path) -> None:
    """One check, two callers: from Python a message names the parameter (``input``), from the
    command line the option typed (``--input``); never a flag the Python caller never saw."""
    from conftest import invoke

    missing = str(tmp_path / "mono.txt")
    with pytest.raises(NmtError) as caught:
        api.backtranslate(NOPE, input=missing, output=str(tmp_path / "bt"))
    assert str(caught.value) == f"input {missing}: file not found"
    with pytest.raises(NmtError) as caught:
        api.translate_lines(lambda: None, ["Hi."], input=missing)
    assert str(caught.value) == "input: give sentences or input, not both"
    with pytest.raises(NmtError, match="^engine marian: expected nmt or ctranslate2$"):
        api.open_translator(NOPE, engine="marian")
    with pytest.raises(NmtError, match="^averaged: .* averaged applies to engine nmt$"):
        api.open_translator(NOPE, engine="ctranslate2", averaged=False)

    code, _, err = invoke("backtranslate", "--run", NOPE, "--input", missing, "--output", "bt")
    assert code == 1 and err.strip() == f"error: --input {missing}: file not found"
    code, _, err = invoke("translate", "--run", NOPE, "--engine", "marian", "Hi.")
    assert code == 1 and err.strip() == "error: --engine marian: expected nmt or ctranslate2"
    code, _, err = invoke("translate", "--run", NOPE, "--engine", "ctranslate2", "--no-ema", "Hi.")
    assert code == 1 and "--no-ema applies to --engine nmt" in err
