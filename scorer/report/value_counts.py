"""A distribution held as its distinct values and their counts: exact percentiles and mean in bounded memory.

A report pools millions of inter-token gaps; they are whole microseconds, so a run has a few thousand distinct values
however long it is. Counting them, instead of keeping every one, bounds a report's memory by the distinct values while
the numbers stay exact: the percentiles are numpy's (linear interpolation, `np.percentile`'s default), taken from the
counts instead of a sorted array, and the mean is the exact mean rounded once, which does not depend on the order the
values came in (a scores file streamed a line at a time, or every result in memory, give the same bytes).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]

# Values buffered before they are folded into the counts: big enough that folding (a sort) is rare, small enough
# (512 KiB) not to matter next to the counts.
_FOLD_AT = 1 << 16


class ValueCounts:
    """Values added one at a time or a sequence at a time; `sorted()` gives the distinct ones and their counts."""

    __slots__ = ("_counts", "_pending", "_values")

    def __init__(self) -> None:
        self._pending = array("d")
        self._values: Floats = np.empty(0, dtype=np.float64)
        self._counts: Ints = np.empty(0, dtype=np.int64)

    def add(self, value: float) -> None:
        self._pending.append(value)
        if len(self._pending) >= _FOLD_AT:
            self._fold()

    def extend(self, values: Iterable[float]) -> None:
        if isinstance(values, np.ndarray):
            self._fold()
            self._merge(values.astype(np.float64, copy=False))
            return
        # array.extend takes another array only of its own type code (gaps are held as int32/int64 arrays).
        self._pending.extend(values.tolist() if isinstance(values, array) else values)
        if len(self._pending) >= _FOLD_AT:
            self._fold()

    def _fold(self) -> None:
        if self._pending:
            pending, self._pending = self._pending, array("d")
            self._merge(np.frombuffer(pending, dtype=np.float64))

    def _merge(self, more: Floats) -> None:
        if more.size == 0:
            return
        new, new_counts = np.unique(more, return_counts=True)
        if self._values.size == 0:
            self._values, self._counts = new, new_counts.astype(np.int64)
            return
        both = np.concatenate([self._values, new])
        values, where = np.unique(both, return_inverse=True)
        counts = np.zeros(values.size, dtype=np.int64)
        np.add.at(counts, where, np.concatenate([self._counts, new_counts.astype(np.int64)]))
        self._values, self._counts = values, counts

    def sorted(self) -> tuple[Floats, Ints]:
        """The distinct values in ascending order, and how many times each was added."""
        self._fold()
        return self._values, self._counts

    def __len__(self) -> int:
        return int(self._counts.sum()) + len(self._pending)


def counted(values: Iterable[float]) -> ValueCounts:
    out = ValueCounts()
    out.extend(values)
    return out


def _at_ranks(values: Floats, cumulative: Ints, ranks: npt.NDArray[np.intp]) -> Floats:
    """The values at these 0-based positions of the sorted sequence the counts stand for."""
    out: Floats = values[np.searchsorted(cumulative, ranks, side="right")]
    return out


def percentiles(values: Floats, counts: Ints, qs: Sequence[float]) -> Floats:
    """`np.percentile(expanded, qs)` (method "linear") where `expanded` is each value repeated its count times, without
    expanding it: the same virtual index, neighbours and interpolation (numpy's `_lerp`: from the upper neighbour when
    the fraction is 0.5 or more), so the same floating-point result. tests/scorer/report/test_value_counts.py checks
    it against numpy on random data."""
    cumulative = np.cumsum(counts)
    n = int(cumulative[-1])
    quantiles = np.true_divide(np.asarray(qs, dtype=np.float64), 100)
    virtual = (n - 1) * quantiles
    lower = np.floor(virtual).astype(np.intp)
    upper = lower + 1
    last = virtual >= n - 1
    lower[last] = n - 1
    upper[last] = n - 1
    gamma = virtual - lower
    gamma[last] = 0.0
    a = _at_ranks(values, cumulative, lower)
    b = _at_ranks(values, cumulative, upper)
    diff = b - a
    out: Floats = np.where(gamma >= 0.5, b - diff * (1 - gamma), a + diff * gamma)
    return out


def median(values: Floats, counts: Ints) -> float:
    """`np.median(expanded)`: the middle value, or the mean of the two middle ones."""
    cumulative = np.cumsum(counts)
    n = int(cumulative[-1])
    middle = _at_ranks(values, cumulative, np.asarray([(n - 1) // 2, n // 2], dtype=np.intp))
    return float(middle[0]) if n % 2 else float((middle[0] + middle[1]) / 2)


def exact_sum_over(values: Floats, counts: Ints, divisor: int) -> float:
    """sum(value * count) / divisor computed exactly and rounded once (floats are dyadic rationals: their sum is an
    integer over a power of two)."""
    numerators: list[int] = []
    shifts: list[int] = []
    for value, count in zip(values.tolist(), counts.tolist(), strict=True):
        num, den = float(value).as_integer_ratio()
        numerators.append(num * count)
        shifts.append(den.bit_length() - 1)
    top = max(shifts, default=0)
    total = sum(num << (top - shift) for num, shift in zip(numerators, shifts, strict=True))
    return total / ((1 << top) * divisor)
