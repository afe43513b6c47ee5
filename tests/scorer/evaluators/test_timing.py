from __future__ import annotations

from bench.scorer.context import TurnTiming
from tests.scorer.helpers import ctx, score

TIMING = TurnTiming(ttft_us=120_000, e2el_us=900_000, tpot_us=20_000.0, output_tokens=40)


def test_thresholds() -> None:
    c = ctx("hi", timing=TIMING)
    assert score("ttft_under", c, ms=200).score == 1.0
    assert score("ttft_under", c, ms=100).score == 0.0
    assert score("total_under", c, ms=1000).score == 1.0
    assert score("total_under", c, ms=900).score == 0.0
    assert score("tokens_per_second_over", c, value=40).score == 1.0
    assert score("tokens_per_second_over", c, value=60).score == 0.0


def test_missing_timing_is_skipped() -> None:
    c = ctx("hi", timing=TurnTiming(e2el_us=5000))
    assert score("ttft_under", c, ms=1).status == "skipped"
    assert score("tokens_per_second_over", c, value=1).status == "skipped"
    assert score("total_under", c, ms=10).status == "scored"


def test_a_limit_is_strict_and_the_detail_shows_both_numbers() -> None:
    # 120 ms to first token, 900 ms in all, 20 ms per token after the first: 50 tokens per second.
    c = ctx("hi", timing=TIMING)
    at_ttft = score("ttft_under", c, ms=120)
    assert (at_ttft.score, at_ttft.detail) == (0.0, "TTFT 120.0 ms >= 120 ms")
    assert score("ttft_under", c, ms=120.5).detail == "TTFT 120.0 ms < 120.5 ms"
    assert score("total_under", c, ms=900).detail == "total 900.0 ms >= 900 ms"
    assert score("total_under", c, ms=901).detail == "total 900.0 ms < 901 ms"
    at_rate = score("tokens_per_second_over", c, value=50)
    assert (at_rate.score, at_rate.detail) == (0.0, "50.0 tok/s <= 50")
    assert score("tokens_per_second_over", c, value=49.5).detail == "50.0 tok/s > 49.5"


def test_what_is_missing_is_named_when_skipped() -> None:
    c = ctx("hi", timing=TurnTiming(tpot_us=0.0))
    assert score("ttft_under", c, ms=1).detail == "no time to first token (not streamed, or no token)"
    assert score("total_under", c, ms=1).detail == "no end-to-end latency recorded"
    assert score("total_under", c, ms=1).status == "skipped"
    no_rate = score("tokens_per_second_over", c, value=1)  # a TPOT of 0: fewer than two tokens
    assert (no_rate.status, no_rate.detail) == (
        "skipped",
        "no time per output token (fewer than two tokens, or not streamed)",
    )
