"""Timing thresholds from the recorded timings of the final exchange (vLLM's definitions, docs/report.md)."""

from __future__ import annotations

from bench.scorer.registry import EvalContext, Score, evaluator
from bench.scorer.signature import Positive


def _latency_under(value: int | None, limit: float, label: str, missing: str) -> Score:
    if value is None:
        return Score.skipped(missing)
    ms = value / 1000
    return Score.of(ms < limit, f"{label} {ms:.1f} ms {'<' if ms < limit else '>='} {limit:g} ms")


@evaluator("ttft_under")
def ttft_under(ctx: EvalContext, *, ms: Positive) -> Score:
    """time to first token below `ms` milliseconds"""
    return _latency_under(ctx.timing.ttft_us, ms, "TTFT", "no time to first token (not streamed, or no token)")


@evaluator("total_under")
def total_under(ctx: EvalContext, *, ms: Positive) -> Score:
    """end-to-end latency below `ms` milliseconds"""
    return _latency_under(ctx.timing.e2el_us, ms, "total", "no end-to-end latency recorded")


@evaluator("tokens_per_second_over")
def tokens_per_second_over(ctx: EvalContext, *, value: Positive) -> Score:
    """decode speed (1 / TPOT, first token excluded, as vLLM measures it) above `value` tokens per second"""
    want = value
    tpot = ctx.timing.tpot_us
    if not tpot:
        return Score.skipped("no time per output token (fewer than two tokens, or not streamed)")
    rate = 1e6 / tpot
    return Score.of(rate > want, f"{rate:.1f} tok/s {'>' if rate > want else '<='} {want:g}")
