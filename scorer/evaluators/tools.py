"""Tool-call evaluators: structure, not text. Calls are read from every turn's final attempt, in order."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from bench.scorer.context import Call
from bench.scorer.evaluators.values import match_value
from bench.scorer.registry import ArgError, EvalContext, Score, evaluator
from bench.scorer.signature import Count, Matchers, Strings, ToolName, ToolNames


def _names(calls: list[Call]) -> list[str]:
    return [c.name for c in calls]


@evaluator("tool_called")
def tool_called(ctx: EvalContext, *, name: ToolName | None = None) -> Score:
    """some call (of that name)"""
    calls = list(ctx.iter_calls(name))
    if calls:
        return Score(1.0, f"called {calls[0].name}")
    made = _names(ctx.all_calls)
    return Score(0.0, f"{name or 'no tool'} not called" + (f" (called {', '.join(made)})" if made else ""))


@evaluator("no_tool_call")
def no_tool_call(ctx: EvalContext) -> Score:
    """no call at all"""
    made = _names(ctx.all_calls)
    return Score.of(not made, "no tool call" if not made else f"called {', '.join(made)}")


@evaluator("first_tool")
def first_tool(ctx: EvalContext, *, name: ToolName) -> Score:
    """the first call has that name"""
    calls = ctx.all_calls
    if not calls:
        return Score(0.0, "no tool call")
    ok = calls[0].name == name
    return Score.of(ok, f"first call {calls[0].name}" + ("" if ok else f", expected {name}"))


def _args_score(call: Call, specs: Mapping[str, Any]) -> tuple[float, list[str]]:
    got = call.args
    problems = []
    for arg, spec in specs.items():
        ok, why = match_value(arg in got, got.get(arg), spec)
        if not ok:
            problems.append(f"{arg}: {why}")
    return (len(specs) - len(problems)) / len(specs) if specs else 1.0, problems


@evaluator("tool_args")
def tool_args(ctx: EvalContext, *, name: ToolName, args: Matchers) -> Score:
    """best call of that name: share of the matchers in `args` (`{arg: matcher}`) satisfied"""
    specs = args
    best: tuple[float, list[str]] | None = None
    for call in ctx.iter_calls(name):
        result = _args_score(call, specs)
        if best is None or result[0] > best[0]:
            best = result
    if best is None:
        return Score(0.0, f"{name} not called")
    score, problems = best
    return Score(score, "arguments match" if not problems else "; ".join(problems))


@evaluator("tool_sequence")
def tool_sequence(ctx: EvalContext, *, names: ToolNames) -> Score:
    """names occur in this order (other calls may come between); credit for the prefix found"""
    made = _names(ctx.all_calls)
    i = 0
    for called in made:
        if i < len(names) and called == names[i]:
            i += 1
    detail = "in order" if i == len(names) else f"stopped before {names[i]} (called {', '.join(made) or 'nothing'})"
    return Score(i / len(names), detail)


@evaluator("parallel_calls")
def parallel_calls(ctx: EvalContext, *, names: ToolNames) -> Score:
    """one assistant turn holds all these calls (a repeated name needs repeated calls)"""
    want = Counter(names)
    for i, calls in enumerate(ctx.tool_calls):
        if not want - Counter(_names(calls)):
            return Score(1.0, f"turn {i} called {', '.join(_names(calls))}")
    per_turn = [", ".join(_names(c)) for c in ctx.tool_calls if c]
    return Score(0.0, f"not in one turn: {' | '.join(per_turn) or 'no calls'}")


@evaluator("call_count")
def call_count(
    ctx: EvalContext, *, name: ToolName | None = None, min: Count | None = None, max: Count | None = None
) -> Score:
    """number of calls (of that name) within bounds"""
    lo, hi = min, max
    if lo is None and hi is None:
        raise ArgError("give min, max or both")
    n = sum(1 for _ in ctx.iter_calls(name))
    ok = (lo is None or n >= lo) and (hi is None or n <= hi)
    bounds = f"[{'' if lo is None else lo}, {'' if hi is None else hi}]"
    return Score.of(ok, f"{n} call(s) of {name or 'any tool'} {'in' if ok else 'outside'} {bounds}")


@evaluator("forbidden_tools")
def forbidden_tools(ctx: EvalContext, *, names: Strings) -> Score:
    """none of these called"""
    banned = set(names)
    used = sorted({c.name for c in ctx.all_calls} & banned)
    return Score.of(not used, f"called forbidden {', '.join(used)}" if used else "no forbidden tool")
