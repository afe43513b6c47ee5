from __future__ import annotations

from tests.scorer.helpers import ctx, score

TIMING = {"ttft_us": 120_000, "e2el_us": 900_000, "tpot_us": 20_000.0, "output_tokens": 40}


def test_thresholds() -> None:
    c = ctx("hi", timing=TIMING)
    assert score("ttft_under", c, ms=200).score == 1.0
    assert score("ttft_under", c, ms=100).score == 0.0
    assert score("total_under", c, ms=1000).score == 1.0
    assert score("total_under", c, ms=900).score == 0.0
    assert score("tokens_per_second_over", c, value=40).score == 1.0
    assert score("tokens_per_second_over", c, value=60).score == 0.0


def test_missing_timing_is_skipped() -> None:
    c = ctx("hi", timing={"ttft_us": None, "e2el_us": 5000, "tpot_us": None})
    assert score("ttft_under", c, ms=1).status == "skipped"
    assert score("tokens_per_second_over", c, value=1).status == "skipped"
    assert score("total_under", c, ms=10).status == "scored"
