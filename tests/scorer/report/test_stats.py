"""Statistics against values computed by hand (the working is in each test's comment)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from bench.scorer.report.stats import mcnemar_exact, paired_bootstrap, pass_at_k, pass_hat_k, percentiles, wilson


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


def test_paired_bootstrap_is_reproducible_and_degenerate_cases() -> None:
    before = [1.0] * 20
    after = [1.0] * 15 + [0.0] * 5
    mean, low, high = paired_bootstrap(before, after, seed=3)
    assert mean == pytest.approx(-0.25)
    assert paired_bootstrap(before, after, seed=3) == (mean, low, high)
    assert paired_bootstrap(before, after, seed=4) != (mean, low, high)
    assert paired_bootstrap([1.0], [0.0]) == (-1.0, -1.0, -1.0)
    assert paired_bootstrap([1.0] * 5, [1.0] * 5) == (0.0, 0.0, 0.0)
    assert paired_bootstrap([], []) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="differ in length"):
        paired_bootstrap([1.0], [1.0, 0.0])


@pytest.mark.parametrize("level", [0.95, 0.9, 0.99])
def test_paired_bootstrap_interval_is_scipys_percentile_interval(level: float) -> None:
    """Against scipy.stats.bootstrap (percentile method, resampling pairs) on the same differences: a 95% interval
    that were really 90% would be about 16% narrower, far outside the resampling noise allowed here."""
    from scipy.stats import bootstrap

    rng = np.random.default_rng(11)
    before = rng.integers(0, 2, size=300).astype(float)
    after = np.where(rng.random(300) < 0.8, before, 1 - before)
    after[:30] = 1.0
    mean, low, high = paired_bootstrap(list(before), list(after), resamples=20_000, seed=5, level=level)
    ref = bootstrap(
        (after - before,), np.mean, confidence_level=level, n_resamples=20_000, method="percentile", random_state=9
    ).confidence_interval
    assert mean == pytest.approx(float((after - before).mean()))
    width = ref.high - ref.low
    assert low == pytest.approx(ref.low, abs=0.03 * width) and high == pytest.approx(ref.high, abs=0.03 * width)
    assert low < mean < high
    if level == 0.95:  # the default is 95%
        assert paired_bootstrap(list(before), list(after), resamples=20_000, seed=5) == (mean, low, high)


def test_pass_at_k_at_the_edges_against_counting_every_draw() -> None:
    """pass@k and pass^k by enumerating every k-subset of n samples (c of them passing), for all small n, c, k."""
    for n in range(1, 8):
        for c in range(n + 1):
            samples = [True] * c + [False] * (n - c)
            for k in range(1, n + 1):
                draws = list(itertools.combinations(samples, k))
                assert pass_at_k(n, c, k) == pytest.approx(sum(any(d) for d in draws) / len(draws)), (n, c, k)
                assert pass_hat_k(n, c, k) == pytest.approx(sum(all(d) for d in draws) / len(draws)), (n, c, k)
    # n - c = k: one draw of the k failures fails: 1 - 1/C(5,3).
    assert pass_at_k(5, 2, 3) == pytest.approx(0.9)
    for bad in ((3, 4, 1), (3, -1, 1), (3, 1, 0)):
        with pytest.raises(ValueError):
            pass_at_k(*bad)
        with pytest.raises(ValueError):
            pass_hat_k(*bad)


@pytest.mark.parametrize(("passed", "n"), [(0, 1), (1, 1), (0, 10), (10, 10), (1, 10), (9, 10), (37, 120), (0, 1000)])
def test_wilson_against_scipy(passed: int, n: int) -> None:
    from scipy.stats import binomtest

    ref = binomtest(passed, n).proportion_ci(confidence_level=0.95, method="wilson")
    low, high = wilson(passed, n)
    assert low == pytest.approx(ref.low, abs=1e-9) and high == pytest.approx(ref.high, abs=1e-9)
    z99 = 2.5758293035489004
    ref99 = binomtest(passed, n).proportion_ci(confidence_level=0.99, method="wilson")
    assert wilson(passed, n, z99) == pytest.approx((ref99.low, ref99.high), abs=1e-9)


def test_mcnemar_against_the_binomial_sum() -> None:
    # Two-sided: twice the smaller tail of Bin(d, 1/2), capped at 1, for every split of up to 30 discordant pairs.
    for d in range(1, 31):
        for r in range(d + 1):
            tail = sum(math.comb(d, i) for i in range(min(r, d - r) + 1)) / 2**d
            assert mcnemar_exact(r, d - r) == pytest.approx(min(1.0, 2 * tail)), (r, d)


def test_paired_bootstrap_batches_change_nothing_and_two_pairs_are_resampled() -> None:
    """Batching (which bounds memory for many pairs) draws the same indices as one big draw would."""
    rng = np.random.default_rng(2)
    before = rng.random(4100)
    after = before + rng.normal(0.1, 1.0, 4100)
    diffs = after - before
    mean, low, high = paired_bootstrap(list(before), list(after), resamples=1000, seed=8)
    assert mean == pytest.approx(float(diffs.mean()))
    means = diffs[np.random.default_rng(8).integers(0, 4100, size=(1000, 4100))].mean(axis=1)
    assert (low, high) == tuple(float(v) for v in np.percentile(means, [2.5, 97.5]))
    # Two pairs are enough to resample: the means are 0, 0.5 or 1.
    assert paired_bootstrap([0.0, 1.0], [1.0, 1.0]) == (0.5, 0.0, 1.0)


def test_statistics_errors_name_the_values() -> None:
    with pytest.raises(ValueError, match=r"^passed=3 outside 0\.\.2$"):
        wilson(3, 2)
    with pytest.raises(ValueError, match=r"^need 0 <= c <= n and 1 <= k <= n, got n=3 c=1 k=4$"):
        pass_at_k(3, 1, 4)
    with pytest.raises(ValueError, match=r"^paired samples differ in length$"):
        paired_bootstrap([1.0], [])
