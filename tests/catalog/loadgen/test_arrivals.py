"""Arrival schedules: constant gaps exactly 1/rate; Poisson and gamma gaps with the asked mean and spread; seeded."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from bench.catalog.loadgen.arrivals import offsets
from bench.core.errors import BenchError


def take(it: object, n: int) -> np.ndarray:
    return np.asarray(list(itertools.islice(it, n)))  # type: ignore[call-overload]


def test_constant_arrivals_are_due_every_one_over_rate() -> None:
    assert take(offsets("constant", 4.0), 5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]


@pytest.mark.parametrize(("arrival", "shape", "cv"), [("poisson", 1.0, 1.0), ("gamma", 0.25, 2.0), ("gamma", 4.0, 0.5)])
def test_random_gaps_have_the_asked_mean_and_the_shape_s_spread(arrival: str, shape: float, cv: float) -> None:
    at = take(offsets(arrival, 20.0, burstiness=shape, seed=7), 40_001)
    gaps = np.diff(at)
    assert at[0] == 0.0 and (gaps >= 0).all()
    # A gamma gap of shape k and mean m has standard deviation m / sqrt(k): coefficient of variation 1 / sqrt(k).
    assert gaps.mean() == pytest.approx(1 / 20, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.05)


def test_a_seed_makes_the_same_schedule_and_another_seed_another() -> None:
    a, b, c = (take(offsets("poisson", 5.0, seed=s), 100) for s in (1, 1, 2))
    assert a.tolist() == b.tolist() and a.tolist() != c.tolist()


@pytest.mark.parametrize(("arrival", "rate", "shape"), [("constant", 0, 1), ("gamma", 1, 0), ("bursts", 1, 1)])
def test_a_bad_schedule_is_one_line(arrival: str, rate: float, shape: float) -> None:
    with pytest.raises(BenchError):
        next(offsets(arrival, rate, burstiness=shape))
