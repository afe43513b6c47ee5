"""Levels and phases: warm-up and cool-down by share or seconds, by time or by count; GuideLLM's sweep rates."""

from __future__ import annotations

import pytest

from bench.catalog.loadgen.levels import COOLDOWN, MEASURE, WARMUP, Bounds, Level, parse_span, parse_values, sweep_rates
from bench.core.errors import BenchError


def test_spans_are_shares_or_seconds() -> None:
    assert parse_span("10%", "--warmup").share == 0.1 and parse_span("2s", "--warmup").seconds == 2.0
    assert parse_span("3", "--warmup").seconds == 3.0 and parse_span(None, "--warmup").none
    for bad in ("ten", "100%", "-1s"):
        with pytest.raises(BenchError, match="--warmup"):
            parse_span(bad, "--warmup")


def test_phases_by_time_and_by_count() -> None:
    b = Bounds(duration_s=10.0, warmup=parse_span("2s", ""), cooldown=parse_span("10%", ""))
    assert [b.phase_by_time(t, 10.0) for t in (0.0, 1.99, 2.0, 8.99, 9.0)] == [
        WARMUP, WARMUP, MEASURE, MEASURE, COOLDOWN,
    ]  # fmt: skip
    # Without a cool-down even the request due at the level's very end is measured (a replayed schedule's last).
    assert Bounds(duration_s=10.0).phase_by_time(10.0, 10.0) == MEASURE
    c = Bounds(requests=10, warmup=parse_span("20%", ""), cooldown=parse_span("10%", ""))
    assert [c.phase_by_count(i, 10) for i in range(10)] == [WARMUP] * 2 + [MEASURE] * 7 + [COOLDOWN]


def test_bounds_refuse_a_level_with_nothing_measured() -> None:
    for bounds in (
        Bounds(),
        Bounds(duration_s=5, requests=3),
        Bounds(requests=10, warmup=parse_span("60%", ""), cooldown=parse_span("40%", "")),
        Bounds(duration_s=5, warmup=parse_span("3s", ""), cooldown=parse_span("2s", "")),
    ):
        with pytest.raises(BenchError):
            bounds.check()


def test_sweep_rates_are_guidellm_s_evenly_spaced_rates() -> None:
    # GuideLLM: linspace(synchronous, throughput, size - 1) without its first point; size counts both first levels.
    assert sweep_rates(1.0, 9.0, 6) == [3.0, 5.0, 7.0, 9.0]
    assert sweep_rates(2.0, 2.5, 3) == [2.5]


def test_labels_and_values() -> None:
    assert Level(0, "rate", 4.5).label == "rate=4.5" and Level(1, "concurrency", 8).concurrency == 8
    assert parse_values("1, 2.5,4", "--rate") == [1.0, 2.5, 4.0]
    for bad in ("1,x", "0", "1,-2", ""):
        with pytest.raises(BenchError, match="--rate"):
            parse_values(bad, "--rate")
    with pytest.raises(BenchError, match="whole numbers"):
        parse_values("1.5", "--concurrency", integer=True)
