"""Tool-call evaluators: structure, not text. Calls are read from every turn's final attempt, in order."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from scorer.context import Call
from scorer.evaluators._args import optional_int, string, strings
from scorer.evaluators.values import match_value
from scorer.registry import REQUIRED, ArgError, EvalContext, Score, evaluator


def _names(calls: list[Call]) -> list[str]:
    return [c.name for c in calls]


@evaluator("tool_called", args={"name": None})
def tool_called(ctx: EvalContext, args: Mapping[str, Any]) -> Score:
    name = args.get("name")
    if name is not None and not isinstance(name, str):
        raise ArgError("name must be a string")
    calls = list(ctx.iter_calls(name))
    if calls:
        return Score(1.0, f"called {calls[0].name}")
    made = _names(ctx.all_calls)
    return Score(0.0, f"{name or 'no tool'} not called" + (f" (called {', '.join(made)})" if made else ""))


@evaluator("no_tool_call")
def no_tool_call(ctx: EvalContext, args: Mapping[str, Any]) -> Score:
    made = _names(ctx.all_calls)
    return Score.of(not made, "no tool call" if not made else f"called {', '.join(made)}")


@evaluator("first_tool", args={"name": REQUIRED})
def first_tool(ctx: EvalContext, args: Mapping[str, Any]) -> Score:
    name = string(args, "name")
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


@evaluator("tool_args", args={"name": REQUIRED, "args": REQUIRED})
def tool_args(ctx: EvalContext, args: Mapping[str, Any]) -> Score:
    """The best call of that name: the share of argument matchers it satisfies."""
    name = string(args, "name")
    specs = args["args"]
    if not isinstance(specs, Mapping):
        raise ArgError("args must map argument names to matchers")
    best: tuple[float, list[str]] | None = None
    for call in ctx.iter_calls(name):
        result = _args_score(call, specs)
        if best is None or result[0] > best[0]:
            best = result
    if best is None:
        return Score(0.0, f"{name} not called")
    score, problems = best
    return Score(score, "arguments match" if not problems else "; ".join(problems))


@evaluator("tool_sequence", args={"names": REQUIRED})
def tool_sequence(ctx: EvalContext, args: Mapping[str, Any]) -> Score:
    """The names must occur in this order (other calls may come between): credit for the prefix found."""
    names = strings(args, "names")
    if not names:
        raise ArgError("names must not be empty")
    made = _names(ctx.all_calls)
    i = 0
    for called in made:
        if i < len(names) and called == names[i]:
            i += 1
    detail = "in order" if i == len(names) else f"stopped before {names[i]} (called {', '.join(made) or 'nothing'})"
    return Score(i / len(names), detail)


@evaluator("parallel_calls", args={"names": REQUIRED})
def parallel_calls(ctx: EvalContext, args: Mapping[str, Any]) -> Score:
    """One assistant turn holds at least these calls (a name listed twice needs two calls)."""
    names = strings(args, "names")
    want = Counter(names)
    for i, calls in enumerate(ctx.tool_calls):
        if not want - Counter(_names(calls)):
            return Score(1.0, f"turn {i} called {', '.join(_names(calls))}")
    per_turn = [", ".join(_names(c)) for c in ctx.tool_calls if c]
    return Score(0.0, f"not in one turn: {' | '.join(per_turn) or 'no calls'}")


@evaluator("call_count", args={"name": None, "min": None, "max": None})
def call_count(ctx: EvalContext, args: Mapping[str, Any]) -> Score:
    name = args.get("name")
    if name is not None and not isinstance(name, str):
        raise ArgError("name must be a string")
    lo, hi = optional_int(args, "min"), optional_int(args, "max")
    if lo is None and hi is None:
        raise ArgError("give min, max or both")
    n = sum(1 for _ in ctx.iter_calls(name))
    ok = (lo is None or n >= lo) and (hi is None or n <= hi)
    bounds = f"[{'' if lo is None else lo}, {'' if hi is None else hi}]"
    return Score.of(ok, f"{n} call(s) of {name or 'any tool'} {'in' if ok else 'outside'} {bounds}")


@evaluator("forbidden_tools", args={"names": REQUIRED})
def forbidden_tools(ctx: EvalContext, args: Mapping[str, Any]) -> Score:
    banned = set(strings(args, "names"))
    used = sorted({c.name for c in ctx.all_calls} & banned)
    return Score.of(not used, f"called forbidden {', '.join(used)}" if used else "no forbidden tool")
