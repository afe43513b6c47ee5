"""Latency per model, in vLLM's serving-benchmark vocabulary (see docs/report.md for the exact definitions).

The scores file already carries per-exchange TTFT, TPOT, E2EL and the list of inter-token gaps; here they are pooled
per model: ITL over all gaps of all exchanges (not a mean of per-request means), the others one value per exchange.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from scorer.results import ExchangeScore, Result

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
    tokens_per_s_median: float | None  # median over exchanges of output_tokens / E2EL
    tokens_per_s_pooled: float | None  # sum(output_tokens) / sum(E2EL): one sequential stream's throughput
    # The recording proxy's longest event-loop stall per exchange (exchanges that carry it): how late its stamps
    # of the reads may be. See LOOP_LAG_WARN_MS.
    loop_lag_ms: Dist = field(default_factory=Dist)


def distribution(values_us: Iterable[float] | np.ndarray) -> Dist:
    """Summarise microsecond values as a Dist in milliseconds (numpy's linear-interpolation percentiles)."""
    arr = values_us if isinstance(values_us, np.ndarray) else np.fromiter(values_us, dtype=float)
    if arr.size == 0:
        return Dist()
    ms = arr.astype(float) / 1000.0
    qs = np.percentile(ms, [*HEADLINE, *BOX, *CDF])
    head, box, cdf = qs[: len(HEADLINE)], qs[len(HEADLINE) : len(HEADLINE) + len(BOX)], qs[len(HEADLINE) + len(BOX) :]
    return Dist(
        count=int(arr.size),
        mean=float(ms.mean()),
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
    ttft: list[float] = []
    tpot: list[float] = []
    e2el: list[float] = []
    itl_lists: list[Sequence[float]] = []
    n_gaps = 0
    tokens: list[float] = []
    tokens_e2el: list[float] = []
    lags: list[float] = []
    n = streamed = counted = total_tokens = 0
    for ex in exchanges:
        n += 1
        lag = ex.loop_lag_us
        if lag is not None:
            lags.append(lag)
        first = ex.ttft_us
        if first is not None:
            streamed += 1
            ttft.append(first)
        per_token = ex.tpot_us
        if per_token is not None:
            tpot.append(per_token)
        gaps = ex.itl_us
        if gaps:
            itl_lists.append(gaps)
            n_gaps += len(gaps)
        end = ex.e2el_us
        if end is not None:
            e2el.append(end)
        out = ex.output_tokens
        if out is not None:
            total_tokens += out
            if ex.tokens_source == "counted":
                counted += 1
            if end:
                tokens.append(out)
                tokens_e2el.append(end)
    # One pass over all gaps into a preallocated array: half the cost of an array per exchange.
    itl = np.fromiter(itertools.chain.from_iterable(itl_lists), dtype=float, count=n_gaps)
    tok = np.asarray(tokens, dtype=float)
    tok_s = np.asarray(tokens_e2el, dtype=float) / 1e6
    return Timing(
        exchanges=n,
        streamed=streamed,
        ttft_ms=distribution(np.asarray(ttft, dtype=float)),
        tpot_ms=distribution(np.asarray(tpot, dtype=float)),
        itl_ms=distribution(itl),
        e2el_ms=distribution(np.asarray(e2el, dtype=float)),
        output_tokens=total_tokens,
        tokens_counted=counted,
        tokens_per_s_median=float(np.median(tok / tok_s)) if tok.size else None,
        tokens_per_s_pooled=float(tok.sum() / tok_s.sum()) if tok.size else None,
        loop_lag_ms=distribution(np.asarray(lags, dtype=float)),
    )
