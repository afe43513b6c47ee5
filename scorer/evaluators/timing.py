"""Timing thresholds from the recorded timings of the final exchange (vLLM's definitions, docs/report.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scorer.evaluators._args import number
from scorer.registry import REQUIRED, EvalContext, Score, evaluator


def _latency_under(ctx: EvalContext, args: Mapping[str, Any], field: str, label: str, missing: str) -> Score:
    limit = number(args, "ms")
    value = ctx.timing.get(field)
    if value is None:
        return Score.skipped(missing)
    ms = value / 1000
    return Score.of(ms < limit, f"{label} {ms:.1f} ms {'<' if ms < limit else '>='} {limit:g} ms")


@evaluator("ttft_under", args={"ms": REQUIRED})
def ttft_under(ctx: EvalContext, args: Mapping[str, Any]) -> Score:
    return _latency_under(ctx, args, "ttft_us", "TTFT", "no time to first token (not streamed, or no token)")


@evaluator("total_under", args={"ms": REQUIRED})
def total_under(ctx: EvalContext, args: Mapping[str, Any]) -> Score:
    return _latency_under(ctx, args, "e2el_us", "total", "no end-to-end latency recorded")


@evaluator("tokens_per_second_over", args={"value": REQUIRED})
def tokens_per_second_over(ctx: EvalContext, args: Mapping[str, Any]) -> Score:
    """Decode speed, 1 / TPOT: first token excluded, as vLLM measures it."""
    want = number(args, "value")
    tpot = ctx.timing.get("tpot_us")
    if not tpot:
        return Score.skipped("no time per output token (fewer than two tokens, or not streamed)")
    rate = 1e6 / tpot
    return Score.of(rate > want, f"{rate:.1f} tok/s {'>' if rate > want else '<='} {want:g}")
