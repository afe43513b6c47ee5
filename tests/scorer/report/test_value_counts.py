"""Percentiles, median and mean from value counts are numpy's on the expanded values, to the last bit."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.scorer.report import value_counts
from bench.scorer.report.latency import HEADLINE, distribution
from bench.scorer.report.value_counts import ValueCounts, counted, exact_sum_over, median, percentiles

QS = [0.0, 1.0, 5.0, 12.5, 25.0, 33.3, 50.0, 66.7, 75.0, 90.0, 95.0, 99.0, 99.9, 100.0]
# Whole microseconds (gaps, TTFT) with many repeats, and arbitrary floats (TPOT, tokens per second).
micros = st.lists(st.integers(min_value=0, max_value=3_000), min_size=1, max_size=400)
floats = st.lists(
    st.floats(min_value=-1e9, max_value=1e9, allow_nan=False, allow_subnormal=False), min_size=1, max_size=200
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(micros, floats))
def test_percentiles_and_median_are_numpys(values: list[float]) -> None:
    arr = np.asarray(values, dtype=float) / 1000.0
    distinct, counts = counted(arr).sorted()
    got = percentiles(distinct, counts, QS)
    want = np.percentile(arr, QS)
    # The counts hold 0.0 and -0.0 as one value (np.unique merges equal floats), so a zero's sign is whichever came
    # first; + 0.0 makes both zeros 0.0 and leaves every other bit to compare.
    assert (got + 0.0).tobytes() == (want + 0.0).tobytes(), (got, want)
    assert median(distinct, counts) == float(np.median(arr))


@settings(max_examples=200, deadline=None)
@given(st.one_of(micros, floats))
def test_the_mean_is_exact_and_rounded_once(values: list[float]) -> None:
    arr = np.asarray(values, dtype=float)
    distinct, counts = counted(arr).sorted()
    exact = sum((Fraction(v) for v in arr.tolist()), Fraction(0)) / len(values)
    assert exact_sum_over(distinct, counts, len(values)) == float(exact)
    # Whatever order the values come in: a stream of the same values in another order gives the same bytes.
    shuffled = counted(np.random.default_rng(0).permutation(arr).tolist())
    assert exact_sum_over(*shuffled.sorted(), len(values)) == float(exact)


def test_folding_in_chunks_counts_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    gaps = rng.integers(100, 400, size=5_000)
    monkeypatch.setattr(value_counts, "_FOLD_AT", 7)  # fold after every few values: many merges
    folded = ValueCounts()
    for chunk in np.array_split(gaps, 300):
        folded.extend(chunk.tolist())
        folded.add(float(chunk[0]))
    extra = [float(c[0]) for c in np.array_split(gaps, 300)]
    whole = np.concatenate([gaps.astype(float), extra])
    values, counts = folded.sorted()
    assert len(folded) == whole.size and int(counts.sum()) == whole.size
    assert values.tolist() == sorted(set(whole.tolist()))
    got = distribution(folded)
    assert [got.p50, got.p90, got.p99] == np.percentile(whole / 1000.0, HEADLINE).tolist()


def test_an_empty_distribution_has_no_numbers() -> None:
    assert distribution(ValueCounts()).count == 0 and distribution([]).mean is None
