"""Statistics against values computed by hand (the working is in each test's comment)."""

from __future__ import annotations

import pytest

from scorer.report.stats import mcnemar_exact, paired_bootstrap, pass_at_k, pass_hat_k, percentiles, wilson


def test_wilson_five_of_ten() -> None:
    # z² = 3.8415; centre = (0.5 + z²/20) / (1 + z²/10) = 0.69207 / 1.38415 = 0.5;
    # half = z / 1.38415 * sqrt(0.25/10 + z²/400) = 1.41601 * 0.186021 = 0.26341.
    low, high = wilson(5, 10)
    assert low == pytest.approx(0.23659, abs=1e-4)
    assert high == pytest.approx(0.76341, abs=1e-4)


def test_wilson_eight_of_ten_is_asymmetric() -> None:
    # centre = (0.8 + 0.19207) / 1.38415 = 0.71673; half = 1.41601 * sqrt(0.016 + 0.0096037) = 0.22658.
    low, high = wilson(8, 10)
    assert low == pytest.approx(0.49016, abs=1e-4)
    assert high == pytest.approx(0.94331, abs=1e-4)


def test_wilson_zero_of_ten_stays_inside_zero_one() -> None:
    # centre = half = 0.19207 / 1.38415 = 0.13877: the interval is [0, 0.27753], never negative.
    low, high = wilson(0, 10)
    assert low == 0.0
    assert high == pytest.approx(0.27753, abs=1e-4)


def test_wilson_without_data_is_the_whole_range() -> None:
    assert wilson(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson(3, 2)


def test_pass_at_k_and_pass_hat_k() -> None:
    # n=5 epochs, c=2 passed, k=2: pass@2 = 1 - C(3,2)/C(5,2) = 1 - 3/10; pass^2 = C(2,2)/C(5,2) = 1/10.
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert pass_hat_k(5, 2, 2) == pytest.approx(0.1)
    # k=1 is the plain pass rate for both.
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_hat_k(5, 2, 1) == pytest.approx(0.4)
    # n=4, c=3, k=3: any 3 of 4 include a pass (pass@3 = 1); all 3 pass in C(3,3)/C(4,3) = 1/4 of the draws.
    assert pass_at_k(4, 3, 3) == 1.0
    assert pass_hat_k(4, 3, 3) == pytest.approx(0.25)
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_hat_k(5, 5, 5) == 1.0
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


def test_mcnemar_exact_p_values() -> None:
    # 0 vs 6 discordant: P = 2 * 0.5^6 = 2/64.
    assert mcnemar_exact(0, 6) == pytest.approx(0.03125)
    # 1 vs 9: 2 * P(X <= 1), X ~ Bin(10, 1/2) = 2 * (1 + 10) / 1024.
    assert mcnemar_exact(1, 9) == pytest.approx(22 / 1024)
    assert mcnemar_exact(9, 1) == pytest.approx(22 / 1024)
    # 3 vs 1: 2 * (1 + 4) / 16.
    assert mcnemar_exact(3, 1) == pytest.approx(0.625)
    assert mcnemar_exact(5, 5) == pytest.approx(1.0)
    assert mcnemar_exact(0, 0) == 1.0


def test_percentiles_interpolate_linearly() -> None:
    # Rank (n-1)q: p50 of 1..4 sits at 1.5 -> 2.5; p90 at 2.7 -> 3 + 0.7; p99 at 2.97 -> 3.97.
    assert percentiles([4, 1, 3, 2], [50, 90, 99]) == pytest.approx([2.5, 3.7, 3.97])
    assert percentiles([10], [50, 99]) == [10.0, 10.0]
    assert percentiles([], [50]) == [None]


def test_paired_bootstrap_brackets_the_mean_and_is_reproducible() -> None:
    before = [1.0] * 20
    after = [1.0] * 15 + [0.0] * 5
    mean, low, high = paired_bootstrap(before, after, seed=3)
    assert mean == pytest.approx(-0.25)
    assert low < mean < high <= 0.0
    assert paired_bootstrap(before, after, seed=3) == (mean, low, high)
    assert paired_bootstrap([1.0], [0.0]) == (-1.0, -1.0, -1.0)
    assert paired_bootstrap([1.0] * 5, [1.0] * 5) == (0.0, 0.0, 0.0)
