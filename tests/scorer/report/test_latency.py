"""Timing pooled per model as vLLM's serving benchmark defines it, on exchanges whose numbers are worked by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.scorer.report import aggregate
from bench.scorer.report.latency import timing
from bench.scorer.report.load import load
from bench.scorer.report.sections import timing_section
from bench.scorer.results import Result
from tests.scorer.report.factory import exchange, meta, result, typed, write_scores


def two_exchanges() -> list[Result]:
    # A: TTFT 10 ms, gaps 1,1,1,5 ms -> E2EL 18 ms, 5 tokens from usage, TPOT 8/4 = 2 ms.
    # B: TTFT 30 ms, one gap of 10 ms -> E2EL 40 ms, 2 tokens counted from the stream, TPOT 10/1 = 10 ms.
    a = exchange("xa", ttft_us=10_000, itl_us=[1_000, 1_000, 1_000, 5_000], output_tokens=5)
    b = exchange("xb", ttft_us=30_000, itl_us=[10_000], output_tokens=2, tokens_source="counted")
    failed = exchange("xf", outcome="timeout", status=504, final=False)
    return [typed(result("t.a", "m", exchanges=[a])), typed(result("t.b", "m", exchanges=[failed, b], retries=1))]


def test_itl_is_pooled_over_all_gaps_not_averaged_per_request() -> None:
    t = timing(two_exchanges())
    # Pooled gaps 1,1,1,5,10: median 1 ms. A mean of per-request means (2 and 10 ms) would give 6.
    assert t.itl_ms.count == 5
    assert t.itl_ms.p50 == pytest.approx(1.0)
    # p90 at rank 3.6: 5 + 0.6 * (10 - 5) = 8.
    assert t.itl_ms.p90 == pytest.approx(8.0)
    assert t.itl_ms.mean == pytest.approx(3.6)


def test_ttft_tpot_e2el_and_throughput() -> None:
    t = timing(two_exchanges())
    assert t.exchanges == 3 and t.streamed == 2
    assert t.ttft_ms.p50 == pytest.approx(20.0)
    # p99 at rank 0.99 between 10 and 30: 10 + 0.99 * 20.
    assert t.ttft_ms.p99 == pytest.approx(29.8)
    assert t.tpot_ms.p50 == pytest.approx(6.0)
    assert t.e2el_ms.p50 == pytest.approx(29.0)
    assert t.output_tokens == 7
    assert t.tokens_counted == 1
    # Per exchange: 5 / 0.018 s = 277.8 and 2 / 0.040 s = 50 tokens/s; median 163.9; pooled 7 / 0.058 s = 120.7.
    assert t.tokens_per_s_median == pytest.approx((5 / 0.018 + 50) / 2)
    assert t.tokens_per_s_pooled == pytest.approx(7 / 0.058)


def test_no_streamed_exchange_gives_empty_distributions() -> None:
    t = timing([typed(result("t", "m", exchanges=[exchange("x", outcome="timeout", status=504)]))])
    assert t.ttft_ms.count == 0 and t.ttft_ms.p50 is None and t.itl_ms.box == []
    assert t.tokens_per_s_median is None


def lagged(lags_us: list[int | None]) -> list[dict[str, object]]:
    return [result(f"t.{i}", "m", exchanges=[exchange(f"x{i}", loop_lag_us=lag)]) for i, lag in enumerate(lags_us)]


def test_loop_lag_is_one_value_per_exchange_that_carries_it() -> None:
    t = timing(map(typed, lagged([100, 300, None, 200])))
    assert t.loop_lag_ms.count == 3
    assert t.loop_lag_ms.p50 == pytest.approx(0.2)
    assert timing(map(typed, lagged([None]))).loop_lag_ms.count == 0  # cassettes that predate the field


def test_the_timing_section_warns_when_the_proxy_stalled_long_enough_to_inflate_itls(tmp_path: Path) -> None:
    # 99 exchanges with a 0.2 ms stall and one with 50 ms: p99 at rank 98.01 = 0.2 + 0.01 * 49.8 = 0.698 ms, no
    # warning; with two at 50 ms the p99 is 50 ms.
    calm = [200] * 99 + [50_000]
    stalled = [200] * 98 + [50_000] * 2
    for lags, warned in ((calm, False), (stalled, True)):
        path = write_scores(tmp_path / "s.jsonl", meta(), lagged(list(lags)))
        notes = " ".join(timing_section(aggregate.build(load(path))).notes)
        assert ("recorded ITLs may be inflated by up to 50.0 ms" in notes) is warned, notes
        assert ("Above 1 ms" in notes) is warned


def test_decode_speed_is_named_beside_the_end_to_end_rate(tmp_path: Path) -> None:
    # A stream served at 20 tokens/s after a 1 s wait: TTFT 1000 ms, 19 gaps of 50 ms, 20 tokens. Decode speed is
    # 19 tokens / 0.95 s = 20.0 tok/s; output tokens / E2EL is 20 / 1.95 s = 10.3 tok/s (the wait counted in).
    served = exchange("x", ttft_us=1_000_000, itl_us=[50_000] * 19, output_tokens=20)
    t = timing([typed(result("t.a", "m", exchanges=[served]))])
    assert t.decode_tokens_per_s_median == pytest.approx(20.0)
    assert t.tokens_per_s_median == pytest.approx(20 / 1.95)
    path = write_scores(tmp_path / "s.jsonl", meta(), [result("t.a", "m", exchanges=[served])])
    section = timing_section(aggregate.build(load(path)))
    row = dict(zip(section.columns, section.rows[0], strict=True))
    assert (row["decode tok/s"], row["E2E tok/s"]) == ("20.0", "10.3")
    assert any("decode tok/s: median per exchange of (output tokens - 1) / (E2EL - TTFT)" in n for n in section.notes)


def test_seconds_per_task_span_every_turn_and_the_tool_runs_between(tmp_path: Path) -> None:
    t0 = 1_700_000_000_000_000
    # Three turns sent at 0 s, 2 s and 5 s, each read whole 1.5 s after it was sent: the task took 6.5 s, of which
    # 4.5 s were answers and 2 s the client's own work between turns (tool runs).
    turns = [
        {**exchange(f"x{i}", turn=i), "started_us": t0 + at, "end_us": 1_500_000}
        for i, at in enumerate((0, 2_000_000, 5_000_000))
    ]
    single = {**exchange("y"), "started_us": t0, "end_us": 800_000}
    lines = [result("agent.a", "m", exchanges=turns), result("t.b", "m", exchanges=[single])]
    report = aggregate.build(load(write_scores(tmp_path / "s.jsonl", meta(), lines)))
    [task] = report.tasks
    assert (task.results, task.multi_turn, task.multi_turn_median_s, task.max_s) == (2, 1, 6.5, 6.5)
    assert task.median_s == pytest.approx((0.8 + 6.5) / 2)
    from bench.scorer.report.sections import task_section

    # p90 of (0.8, 6.5) by linear interpolation: 0.8 + 0.9 * 5.7 = 5.93.
    assert task_section(report).rows == [["m", "2", "3.65", "5.93", "6.50", "1", "6.50", "6.50"]]
