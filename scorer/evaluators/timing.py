"""Timing thresholds from the recorded timings of the final exchange (vLLM's definitions, FIELD-NOTES)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scorer.evaluators._args import number
from scorer.registry import REQUIRED, EvalContext, Score, evaluator


@evaluator("ttft_under", args={"ms": REQUIRED})
def ttft_under(ctx: EvalContext, args: Mapping[str, Any]) -> Score:
    limit = number(args, "ms")
    ttft = ctx.timing.get("ttft_us")
    if ttft is None:
        return Score.skipped("no time to first token (not streamed, or no token)")
    ms = ttft / 1000
    return Score.of(ms < limit, f"TTFT {ms:.1f} ms {'<' if ms < limit else '>='} {limit:g} ms")


@evaluator("total_under", args={"ms": REQUIRED})
def total_under(ctx: EvalContext, args: Mapping[str, Any]) -> Score:
    limit = number(args, "ms")
    e2el = ctx.timing.get("e2el_us")
    if e2el is None:
        return Score.skipped("no end-to-end latency recorded")
    ms = e2el / 1000
    return Score.of(ms < limit, f"total {ms:.1f} ms {'<' if ms < limit else '>='} {limit:g} ms")


@evaluator("tokens_per_second_over", args={"value": REQUIRED})
def tokens_per_second_over(ctx: EvalContext, args: Mapping[str, Any]) -> Score:
    """Decode speed, 1 / TPOT: first token excluded, as vLLM measures it."""
    want = number(args, "value")
    tpot = ctx.timing.get("tpot_us")
    if not tpot:
        return Score.skipped("no time per output token (fewer than two tokens, or not streamed)")
    rate = 1e6 / tpot
    return Score.of(rate > want, f"{rate:.1f} tok/s {'>' if rate > want else '<='} {want:g}")
