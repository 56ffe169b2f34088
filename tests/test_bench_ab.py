"""bench.ab's alternation: both sides see the same batches each round, the side that starts
alternates, and the ratio is the median of the rounds' (never a mean of speeds)."""

from __future__ import annotations

import pytest

from bench.ab import alternate, median_ratio


def test_rounds_alternate_the_first_side_on_the_same_batches() -> None:
    calls: list[tuple[str, int]] = []
    now = [0.0]

    def clock() -> float:
        return now[0]

    def side(name: str, seconds_per_token: float):  # type: ignore[no-untyped-def]
        def step(batch: int) -> int:
            calls.append((name, batch))
            now[0] += batch * seconds_per_token
            return batch
        return step

    rounds = alternate({"A": side("A", 0.01), "B": side("B", 0.005)}, [1, 2, 3, 4, 5, 6],
                       block=2, rounds=3, clock=clock)
    assert calls == [("A", 1), ("A", 2), ("B", 1), ("B", 2),
                     ("B", 3), ("B", 4), ("A", 3), ("A", 4),
                     ("A", 5), ("A", 6), ("B", 5), ("B", 6)]
    assert [round(r["A"]) for r in rounds] == [100, 100, 100]
    assert [round(r["B"]) for r in rounds] == [200, 200, 200]
    assert median_ratio(rounds) == pytest.approx(2.0)


def test_the_median_of_ratios_resists_one_disturbed_round() -> None:
    rounds = [{"A": 100.0, "B": 110.0}, {"A": 100.0, "B": 112.0}, {"A": 10.0, "B": 100.0}]
    assert median_ratio(rounds) == pytest.approx(1.12)


def test_too_few_batches_for_the_rounds_is_an_error() -> None:
    with pytest.raises(ValueError, match="need 6 batches, got 5"):
        alternate({"A": lambda b: 1, "B": lambda b: 1}, [0] * 5, block=2, rounds=3)
