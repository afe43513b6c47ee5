"""Two load runs compared level by level (`bench compare A B` when both are `bench load` runs): each level's
figures on both sides, B - A, and a 95% interval for the difference.

Levels are paired by their number (a sweep's level 3 against the other run's level 3; their loads are shown, and a
warning says when they differ). Intervals, each for B - A with the two runs independent:
- latency percentiles (TTFT, TPOT, E2EL p50 and p99): percentile bootstrap, requests resampled on each side
  (1000 resamples, fixed seed); ITL is pooled over gaps and shown without an interval;
- request, goodput and output token throughput: batch means over time: each side's wall time cut in 10 equal
  slices, the rate of completions (good ones, their tokens) ending in each; the difference of the means (which are
  the throughputs over wall time) ± 1.96 standard errors of the slices (the ramp at a level's start widens it);
- SLO attainment, error rate and pass rate: Newcombe's hybrid score interval from each side's Wilson interval.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from bench.scorer.report.slo import good
from bench.scorer.report.stats import Z95, wilson
from bench.scorer.report.value_counts import ValueCounts, percentiles
from bench.scorer.results import Result, TrafficLine

RESAMPLES = 1000
SEED = 0


@dataclass
class LevelSample:
    """What the comparison needs of one level: its measured requests' values, one per request."""

    load: str = ""
    requests: int = 0
    completed: int = 0
    good: int = 0
    first_start: int | None = None
    last_end: int | None = None
    ttft: array = field(default_factory=lambda: array("d"))  # type: ignore[type-arg]
    tpot: array = field(default_factory=lambda: array("d"))  # type: ignore[type-arg]
    e2el: array = field(default_factory=lambda: array("d"))  # type: ignore[type-arg]
    tokens: array = field(default_factory=lambda: array("q"))  # type: ignore[type-arg]
    ends: array = field(default_factory=lambda: array("q"))  # type: ignore[type-arg]  # completed ones' ends
    goods: array = field(default_factory=lambda: array("b"))  # type: ignore[type-arg]
    itl: ValueCounts = field(default_factory=ValueCounts)
    scored: int = 0
    passed: int = 0

    @property
    def wall_s(self) -> float | None:
        if self.first_start is None or self.last_end is None or self.last_end <= self.first_start:
            return None
        return (self.last_end - self.first_start) / 1e6


class SamplesTally:
    """Every level of a scores file, kept as per-request values (memory: a few numbers per measured request)."""

    def __init__(self, slo: Mapping[str, float]) -> None:
        self.slo = slo
        self.levels: dict[int, LevelSample] = {}

    def traffic_line(self, line: TrafficLine) -> None:
        tag = line.load
        if tag is None or tag.phase != "measure":
            return
        s = self.levels.setdefault(tag.level, LevelSample(load=tag.load))
        start = line.started or 0
        end = start + (line.end_us or 0)
        s.first_start = start if s.first_start is None else min(s.first_start, start)
        s.last_end = end if s.last_end is None else max(s.last_end, end)
        s.requests += 1
        if line.failed:
            return
        s.completed += 1
        ok = good(line, self.slo)
        s.good += ok
        s.goods.append(ok)
        s.ends.append(end)
        s.tokens.append(line.output_tokens or 0)
        for values, value in ((s.ttft, line.ttft_us), (s.tpot, line.tpot_us), (s.e2el, line.e2el_us)):
            if value is not None:
                values.append(value / 1000)
        if line.itl_us:
            s.itl.extend(line.itl_us)

    def result(self, result: Result) -> None:
        if result.level is None or result.status != "scored":
            return
        s = self.levels.setdefault(result.level, LevelSample())
        s.scored += 1
        s.passed += bool(result.passed)


@dataclass
class LevelDelta:
    level: int
    load_a: str
    load_b: str
    metric: str
    unit: str
    a: float | None
    b: float | None
    delta: float | None
    low: float | None
    high: float | None


def _percentile_boot(q: float) -> Callable[[LevelSample, LevelSample, str], tuple[float, float, float, float] | None]:
    def compare(a: LevelSample, b: LevelSample, attr: str) -> tuple[float, float, float, float] | None:
        xa, xb = np.frombuffer(getattr(a, attr), dtype=np.float64), np.frombuffer(getattr(b, attr), dtype=np.float64)
        if not xa.size or not xb.size:
            return None
        pa, pb = float(np.percentile(xa, q)), float(np.percentile(xb, q))
        rng = np.random.default_rng(SEED)
        diffs = np.percentile(xb[rng.integers(0, xb.size, (RESAMPLES, xb.size))], q, axis=1) - np.percentile(
            xa[rng.integers(0, xa.size, (RESAMPLES, xa.size))], q, axis=1
        )
        low, high = np.percentile(diffs, [2.5, 97.5])
        return pa, pb, float(low), float(high)

    return compare


SLICES = 10


def _slice_rates(s: LevelSample, weights: np.ndarray) -> np.ndarray | None:
    """Per slice of the level's wall time, the weights (1 per completion, its goodness, its tokens) of the
    completions ending in it, per second."""
    wall = s.wall_s
    if not wall or s.first_start is None:
        return None
    ends = (np.frombuffer(s.ends, dtype=np.int64) - s.first_start) / 1e6
    which = np.minimum((ends / wall * SLICES).astype(np.int64), SLICES - 1)
    return np.bincount(which, weights=weights, minlength=SLICES) / (wall / SLICES)


def _batch_means(a: LevelSample, b: LevelSample, what: str) -> tuple[float, float, float, float] | None:
    def weights(s: LevelSample) -> np.ndarray:
        if what == "tokens":
            return np.frombuffer(s.tokens, dtype=np.int64).astype(np.float64)
        if what == "good":
            return np.frombuffer(s.goods, dtype=np.int8).astype(np.float64)
        return np.ones(len(s.ends))

    ra, rb = _slice_rates(a, weights(a)), _slice_rates(b, weights(b))
    if ra is None or rb is None:
        return None
    ma, mb = float(ra.mean()), float(rb.mean())
    half = Z95 * math.sqrt(ra.var(ddof=1) / SLICES + rb.var(ddof=1) / SLICES)
    return ma, mb, mb - ma - half, mb - ma + half


def newcombe(xa: int, na: int, xb: int, nb: int) -> tuple[float, float, float, float] | None:
    """pB - pA and Newcombe's hybrid score interval (his method 10) from the two Wilson intervals."""
    if not na or not nb:
        return None
    pa, pb = xa / na, xb / nb
    la, ua = wilson(xa, na)
    lb, ub = wilson(xb, nb)
    d = pb - pa
    return pa, pb, d - math.sqrt((pb - lb) ** 2 + (ua - pa) ** 2), d + math.sqrt((ub - pb) ** 2 + (pa - la) ** 2)


def compare_levels(a: Mapping[int, LevelSample], b: Mapping[int, LevelSample]) -> tuple[list[LevelDelta], list[str]]:
    rows: list[LevelDelta] = []
    warnings: list[str] = []
    only = sorted(set(a) ^ set(b))
    if only:
        warnings.append(f"load levels on one side only (not compared): {', '.join(map(str, only))}")
    for level in sorted(set(a) & set(b)):
        sa, sb = a[level], b[level]
        if sa.load != sb.load:
            warnings.append(f"load level {level} is {sa.load} in A and {sb.load} in B: compared all the same")
        for metric, unit, found in _level_figures(sa, sb):
            if found is not None:
                va, vb, low, high = found
                rows.append(LevelDelta(level, sa.load, sb.load, metric, unit, va, vb, vb - va, low, high))
        for q in (50.0, 99.0):
            pa, pb = _pooled(sa.itl, q), _pooled(sb.itl, q)
            if pa is not None and pb is not None:
                rows.append(LevelDelta(level, sa.load, sb.load, f"ITL p{q:g}", "ms", pa, pb, pb - pa, None, None))
    return rows, warnings


Figure = tuple[str, str, tuple[float, float, float, float] | None]


def _level_figures(sa: LevelSample, sb: LevelSample) -> list[Figure]:
    out: list[Figure] = [
        ("request throughput", "req/s", _batch_means(sa, sb, "completed")),
        ("goodput", "req/s", _batch_means(sa, sb, "good")),
        ("output token throughput", "tok/s", _batch_means(sa, sb, "tokens")),
    ]
    for attr, name in (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2el", "E2EL")):
        out += [(f"{name} p{q:g}", "ms", _percentile_boot(q)(sa, sb, attr)) for q in (50.0, 99.0)]
    out.append(("SLO attainment", "share", newcombe(sa.good, sa.requests, sb.good, sb.requests)))
    failed_a, failed_b = sa.requests - sa.completed, sb.requests - sb.completed
    out.append(("error rate", "share", newcombe(failed_a, sa.requests, failed_b, sb.requests)))
    if sa.scored and sb.scored:
        out.append(("pass rate", "share", newcombe(sa.passed, sa.scored, sb.passed, sb.scored)))
    return out


def _pooled(counts: ValueCounts, q: float) -> float | None:
    values, n = counts.sorted()
    if not n.size:
        return None
    return float(percentiles(values, n, [q])[0]) / 1000
