"""The models compute what they computed when ``tests/data/golden_models.pt`` was written.

The file (made by ``tests/make_golden_models.py``, which says what it holds) pins logits,
incremental logits, attention weights, greedy and beam outputs and training gradients of tiny
seeded GRU and Transformer models. Outputs are compared where the model decides them by more
than a tie (ties.py): numbers agree only within float noise between CPUs (AVX2 and AVX-512
round differently) and between rewrites. A rewrite of the model or search code that is meant
to change nothing must pass this unchanged; a change that is meant to change the numbers
regenerates the file on purpose and says why.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from make_golden_models import BEAM, MAX_LEN, PATH, build, eval_outputs, loss_gradients
from ties import TIE, assert_greedy_equal_up_to_ties, replay_beam

GOLDEN: dict[str, Any] = torch.load(PATH, weights_only=True)
TOL = dict(atol=1e-5, rtol=1e-4)


def model_of(record: dict[str, Any], dropout: float = 0.1) -> torch.nn.Module:
    model = build(record["fields"], record["joint"], dropout=dropout)
    model.load_state_dict(record["state_dict"])  # strict: names and shapes unchanged
    return model


def assert_same_hypotheses(got: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    assert [h["tokens"] for h in got] == [h["tokens"] for h in expected]
    assert [h["finished"] for h in got] == [h["finished"] for h in expected]
    torch.testing.assert_close(torch.tensor([h["score"] for h in got]),
                               torch.tensor([h["score"] for h in expected]), **TOL)


def sources(record: dict[str, Any]) -> list[list[int]]:
    x = record["inputs"]
    return [x["src"][i, : int(n)].tolist() for i, n in enumerate(x["lengths"])]


def beam_decided(record: dict[str, Any]) -> list[bool]:
    """Per source: whether its golden n-best list is decided by more than a tie (ties.py), so
    that any computation of the model within float noise gives it."""
    model = model_of(record).eval()
    return [replay_beam(model, src, MAX_LEN, BEAM, 1.0, n_best=BEAM).margin > TIE
            for src in sources(record)]


@pytest.mark.parametrize("name", list(GOLDEN))
def test_eval_outputs_match_the_golden_file(name: str) -> None:
    """Numbers within TOL; greedy outputs equal up to ties; beam n-best lists equal where no
    tie decided them."""
    record = GOLDEN[name]
    model = model_of(record)
    got = eval_outputs(model, record["inputs"])
    torch.testing.assert_close(got["logits"], record["logits"], **TOL)
    torch.testing.assert_close(got["step_logits"], record["step_logits"], **TOL)
    assert set(got["weights"]) == set(record["weights"])
    for key, weights in record["weights"].items():
        torch.testing.assert_close(got["weights"][key], weights, **TOL)
    assert len(got["greedy"]) == 4 and all(len(h["tokens"]) <= MAX_LEN for h in got["greedy"])
    assert_greedy_equal_up_to_ties(model, sources(record),
                                   [h["tokens"] for h in record["greedy"]],
                                   [h["tokens"] for h in got["greedy"]], [MAX_LEN] * 4)
    same = [(g, e) for g, e in zip(got["greedy"], record["greedy"], strict=True)
            if g["tokens"] == e["tokens"]]
    assert_same_hypotheses([g for g, _ in same], [e for _, e in same])
    for hyps, expected, decided in zip(got["beam"], record["beam"], beam_decided(record),
                                       strict=True):
        assert len(hyps) <= BEAM
        if decided:
            assert_same_hypotheses(hyps, expected)


@pytest.mark.parametrize("name", list(GOLDEN))
def test_training_gradients_match_the_golden_file(name: str) -> None:
    record = GOLDEN[name]
    grads = loss_gradients(model_of(record, dropout=0.0), record["inputs"])
    assert set(grads) == set(record["grads"])
    for param, grad in record["grads"].items():
        torch.testing.assert_close(grads[param], grad, **TOL, msg=lambda m, p=param: f"{p}: {m}")


def test_the_golden_file_holds_what_the_variants_need() -> None:
    """Outputs that finish early and outputs cut at the limit, all attention kinds, and every
    parameter's gradient: otherwise the tests above would check less than they claim."""
    greedy = [h for record in GOLDEN.values() for h in record["greedy"]]
    assert any(h["finished"] for h in greedy) and not all(h["finished"] for h in greedy)
    decided = [d for record in GOLDEN.values() for d in beam_decided(record)]
    assert sum(decided) >= 0.75 * len(decided)  # the beam comparison covers most lists
    kinds = {name: set(record["weights"]) for name, record in GOLDEN.items()}
    assert kinds["gru-1"] == {"cross"}
    assert kinds["transformer-postnorm"] == {"enc", "self", "cross"}
    for record in GOLDEN.values():
        names = {k for k in record["state_dict"]}
        assert set(record["grads"]) <= names and len(record["grads"]) > 0
