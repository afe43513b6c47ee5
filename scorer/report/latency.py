"""Latency per model, in vLLM's serving-benchmark vocabulary (see docs/report.md for the exact definitions).

The scores file already carries per-exchange TTFT, TPOT, E2EL and the list of inter-token gaps; here they are pooled
per model: ITL over all gaps of all exchanges (not a mean of per-request means), the others one value per exchange.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from bench.scorer.report.value_counts import ValueCounts, counted, exact_sum_over, median, percentiles
from bench.scorer.results import ExchangeScore, Result

# Headline percentiles (vLLM prints p50/p90/p99), then the points the HTML charts draw: a box (p5..p95) and a CDF.
HEADLINE = (50.0, 90.0, 99.0)

# The report warns when the p99 over exchanges of the proxy's longest loop stall is above this. A read that arrived
# during a stall is stamped late by up to the stall, which lengthens one recorded gap (and shortens the next): above
# 1 ms, stalls exceed the 0.5 ms within which the recorded ITL p99 should match the client's, and are a visible share
# of a fast model's ITL (~7 ms per token for a small local model).
LOOP_LAG_WARN_MS = 1.0
BOX = (5.0, 25.0, 50.0, 75.0, 95.0)
CDF = tuple(float(q) for q in range(0, 101, 5))


@dataclass
class Dist:
    """A latency distribution in milliseconds."""

    count: int = 0
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    box: list[float] = field(default_factory=list)
    cdf: list[float] = field(default_factory=list)


@dataclass
class Timing:
    """One model's timing over every exchange that has it (failed attempts have none)."""

    exchanges: int
    streamed: int
    ttft_ms: Dist
    tpot_ms: Dist
    itl_ms: Dist
    e2el_ms: Dist
    output_tokens: int
    tokens_counted: int  # exchanges whose token count was counted from the stream, not read from usage
    tokens_per_s_median: float | None  # median over exchanges of output_tokens / E2EL ("E2E tok/s")
    tokens_per_s_pooled: float | None  # sum(output_tokens) / sum(E2EL): one sequential stream's throughput
    # Decode speed, the rate a server is said to serve at: (output tokens - 1) / (E2EL - TTFT) = 1 / TPOT, the first
    # token and the wait for it left out; median over streamed exchanges of at least two tokens.
    decode_tokens_per_s_median: float | None = None
    # The recording proxy's longest event-loop stall per exchange (exchanges that carry it): how late its stamps
    # of the reads may be. See LOOP_LAG_WARN_MS.
    loop_lag_ms: Dist = field(default_factory=Dist)


def distribution(values_us: Iterable[float] | np.ndarray | ValueCounts) -> Dist:
    """Summarise microsecond values as a Dist in milliseconds: numpy's linear-interpolation percentiles, and the
    exact mean (rounded once), taken from the values' counts (bench.scorer.report.value_counts) so that the order the
    values came in, and whether they were all held at once, changes nothing."""
    found = values_us if isinstance(values_us, ValueCounts) else counted(values_us)
    values, counts = found.sorted()
    if counts.size == 0:
        return Dist()
    n = int(counts.sum())
    ms = values / 1000.0
    qs = percentiles(ms, counts, [*HEADLINE, *BOX, *CDF])
    head, box, cdf = qs[: len(HEADLINE)], qs[len(HEADLINE) : len(HEADLINE) + len(BOX)], qs[len(HEADLINE) + len(BOX) :]
    return Dist(
        count=n,
        mean=exact_sum_over(ms, counts, n),
        p50=float(head[0]),
        p90=float(head[1]),
        p99=float(head[2]),
        box=[float(v) for v in box],
        cdf=[float(v) for v in cdf],
    )


def timing(results: Iterable[Result]) -> Timing:
    """Pool the timing of every exchange of these results (all attempts: a retry's latency is latency too)."""
    return exchange_timing(ex for result in results for ex in result.exchanges)


def exchange_timing(exchanges: Iterable[ExchangeScore]) -> Timing:
    """Pool the timing of these exchanges."""
    tally = TimingTally()
    for ex in exchanges:
        tally.add(ex)
    return tally.finish()


class ExactSum:
    """A running sum of floats kept exact (an integer over a power of two), rounded once when read."""

    __slots__ = ("_num", "_shift")

    def __init__(self) -> None:
        self._num = 0
        self._shift = 0

    def add(self, value: float) -> None:
        num, den = float(value).as_integer_ratio()
        shift = den.bit_length() - 1
        if shift > self._shift:
            self._num <<= shift - self._shift
            self._shift = shift
        self._num += num << (self._shift - shift)

    def ratio_to(self, numerator: int) -> float:
        """numerator / this sum, rounded once."""
        return (numerator << self._shift) / self._num


class TimingTally:
    """Timing pooled one exchange at a time, in memory bounded by the distinct values (see distribution)."""

    __slots__ = (
        "counted",
        "decode",
        "e2el",
        "itl",
        "lags",
        "measured_tokens",
        "n",
        "seconds",
        "streamed",
        "tokens",
        "tokens_per_s",
        "tpot",
        "ttft",
    )

    def __init__(self) -> None:
        self.ttft, self.tpot, self.itl, self.e2el = ValueCounts(), ValueCounts(), ValueCounts(), ValueCounts()
        self.lags, self.tokens_per_s, self.decode = ValueCounts(), ValueCounts(), ValueCounts()
        self.seconds = ExactSum()
        self.n = self.streamed = self.counted = self.tokens = self.measured_tokens = 0

    def add(self, ex: ExchangeScore) -> None:
        self.n += 1
        lag = ex.loop_lag_us
        if lag is not None:
            self.lags.add(lag)
        first = ex.ttft_us
        if first is not None:
            self.streamed += 1
            self.ttft.add(first)
        per_token = ex.tpot_us
        if per_token is not None:
            self.tpot.add(per_token)
            if per_token > 0:
                self.decode.add(1e6 / per_token)
        gaps = ex.itl_us
        if gaps:
            self.itl.extend(gaps)
        end = ex.e2el_us
        if end is not None:
            self.e2el.add(end)
        out = ex.output_tokens
        if out is not None:
            self.tokens += out
            if ex.tokens_source == "counted":
                self.counted += 1
            if end:
                seconds = float(end) / 1e6
                self.tokens_per_s.add(float(out) / seconds)
                self.seconds.add(seconds)
                self.measured_tokens += out

    def finish(self) -> Timing:
        rates = self.tokens_per_s.sorted()
        measured = rates[1].size > 0
        decode = self.decode.sorted()
        return Timing(
            exchanges=self.n,
            streamed=self.streamed,
            ttft_ms=distribution(self.ttft),
            tpot_ms=distribution(self.tpot),
            itl_ms=distribution(self.itl),
            e2el_ms=distribution(self.e2el),
            output_tokens=self.tokens,
            tokens_counted=self.counted,
            tokens_per_s_median=median(*rates) if measured else None,
            tokens_per_s_pooled=self.seconds.ratio_to(self.measured_tokens) if measured else None,
            loop_lag_ms=distribution(self.lags),
            decode_tokens_per_s_median=median(*decode) if decode[1].size else None,
        )


def task_seconds(exchanges: Iterable[ExchangeScore]) -> float | None:
    """A result's wall time: its first exchange's start to its last exchange's end, every turn and attempt, tool
    runs and the client's time between turns included. None when the exchanges carry no wall-clock times."""
    first = last = None
    for ex in exchanges:
        start = ex.started_us
        if start is None:
            continue
        end = start + (ex.end_us or ex.e2el_us or 0)
        first = start if first is None else min(first, start)
        last = end if last is None else max(last, end)
    if first is None or last is None:
        return None
    return (last - first) / 1e6
