"""One failure type per failed result (docs/scorer.md, "Failure types", gives the precedence and the reasons).

Transport failures come from the final attempt's outcome and make the result `errored`. Model failures are typed
from the exchange itself first (malformed or unknown calls), then from the failed checks, most specific first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jsonschema

from bench.catalog.model import Check, TestSpec
from bench.scorer.context import EvalContext, Turn
from bench.scorer.registry import Score
from bench.workspace import WORKSPACE_TOOLS

TRANSPORT = ("upstream_error", "timeout", "truncated_stream", "client_disconnect")

# Highest precedence first.
MODEL_FAILURES = (
    "max_tokens",
    "invalid_json",
    "text_tool_call",
    "unknown_tool",
    "invalid_args",
    "call_limit",
    "no_call",
    "unneeded_call",
    "not_parallel",
    "wrong_tool",
    "too_few_calls",
    "patch_failed",
    "wrong_args",
    "outcome_mismatch",
)
# A check that could not be evaluated (its evaluator raised, timed out or could not start its sandbox): status
# `errored` like a transport failure, but the scorer's, not the gateway's or the model's.
EVALUATOR_ERROR = "evaluator_error"
SCORER_FAILURES = (EVALUATOR_ERROR,)
FAILURE_TYPES = MODEL_FAILURES + TRANSPORT + SCORER_FAILURES

_OUTCOMES = {
    "upstream_error": "upstream_error",
    "timeout": "timeout",
    "truncated": "truncated_stream",
    "client_disconnected": "client_disconnect",
}
READ_ONLY_TOOLS = frozenset({"read_file", "list_dir", "grep"})
_WORKSPACE_CHECKS = frozenset(
    {"file_exists", "file_contains", "file_not_contains", "file_unchanged", "command_succeeds"}
)


def transport_failure(turn: Turn) -> str | None:
    """The transport failure of one exchange, or None when the client got a usable answer."""
    if turn.outcome in _OUTCOMES:
        return _OUTCOMES[turn.outcome]
    if turn.status is None or turn.status >= 400 or "error_event" in turn.findings:
        return "upstream_error"
    if "truncated" in turn.findings:
        return "truncated_stream"
    return None


def tool_schemas(test: TestSpec) -> dict[str, Mapping[str, Any]]:
    """Offered tool name → JSON Schema of its parameters."""
    schemas: dict[str, Mapping[str, Any]] = {}
    for tool in test.tools:
        fn = tool.get("function") or {}
        if fn.get("name"):
            schemas[fn["name"]] = fn.get("parameters") or {}
    if test.workspace is not None and not schemas:
        from bench.workspace import workspace_tool_schemas

        for schema in workspace_tool_schemas(test.workspace.tools):
            schemas[schema["function"]["name"]] = schema["function"].get("parameters") or {}
    return schemas


def _exchange_failure(ctx: EvalContext) -> str | None:
    if any(t.finish_reason == "length" for t in ctx.turns):
        # The answer stopped at the token limit: what is wrong after that (cut JSON, no answer) follows from it.
        return "max_tokens"
    calls = ctx.all_calls
    if any(not c.valid_json for c in calls):
        return "invalid_json"
    if any("text_tool_call" in t.findings for t in ctx.turns) and not calls:
        return "text_tool_call"
    schemas = tool_schemas(ctx.test)
    offered = set(schemas) | (set(WORKSPACE_TOOLS) & set(ctx.test.workspace.tools) if ctx.test.workspace else set())
    if any(c.name not in offered for c in calls):
        return "unknown_tool"
    for c in calls:
        schema = schemas.get(c.name)
        if schema and (not isinstance(c.parsed, dict) or not _valid(c.parsed, schema)):
            return "invalid_args"
    if _hit_limit(ctx):
        return "call_limit"
    return None


def _hit_limit(ctx: EvalContext) -> bool:
    """The conversation went past a limit, or was stopped at one while the model was still calling tools."""
    limits = ctx.test.limits
    n_calls, n_turns = len(ctx.all_calls), len(ctx.turns)
    max_turns = max(limits.max_turns, 1)
    if (limits.max_calls and n_calls > limits.max_calls) or n_turns > max_turns:
        return True
    still_calling = bool(ctx.turns and ctx.turns[-1].calls) and ctx.test.multi_turn
    return still_calling and (n_turns >= max_turns or bool(limits.max_calls and n_calls >= limits.max_calls))


def _valid(args: Mapping[str, Any], schema: Mapping[str, Any]) -> bool:
    try:
        cls = jsonschema.validators.validator_for(schema)
        return bool(cls(schema).is_valid(args))
    except jsonschema.SchemaError:
        return True


def _check_failure(ctx: EvalContext, check: Check) -> str:
    """The failure type a failed check points at."""
    name = check.evaluator
    calls = ctx.all_calls
    if name == "no_tool_call":
        return "unneeded_call"
    if name == "forbidden_tools":
        return "wrong_tool"
    if name in ("tool_called", "first_tool", "tool_args", "tool_sequence", "parallel_calls") and not calls:
        return "no_call"
    if name == "call_count":
        hi, lo = check.args.get("max"), check.args.get("min")
        n = sum(1 for _ in ctx.iter_calls(check.args.get("name")))
        if hi is not None and n > hi:
            return "call_limit"
        if n == 0 and lo:
            return "wrong_tool" if calls else "no_call"
        return "too_few_calls"
    if name == "parallel_calls":
        want = list(check.args.get("names") or [])
        made = [c.name for c in calls]
        if all(made.count(n) >= want.count(n) for n in want):
            return "not_parallel"
        return "too_few_calls" if set(want) >= set(made) else "wrong_tool"
    if name == "tool_sequence":
        want = list(check.args.get("names") or [])
        made = [c.name for c in calls]
        # Calling only tools of the sequence, but stopping early, is too few calls; anything else is a wrong tool.
        return "too_few_calls" if set(made) <= set(want) else "wrong_tool"
    if name in ("tool_called", "first_tool"):
        return "wrong_tool"
    if name == "tool_args":
        return "wrong_args" if any(True for _ in ctx.iter_calls(check.args.get("name"))) else "wrong_tool"
    if name in _WORKSPACE_CHECKS and ctx.test.workspace is not None and ctx.workspace.patch_failed:
        return "patch_failed"
    return "outcome_mismatch"


def classify(ctx: EvalContext, scored: Sequence[tuple[Check, Score]]) -> str:
    """The failure type of a result that did not pass."""
    found = _exchange_failure(ctx)
    if found is not None:
        return found
    failed = [_check_failure(ctx, c) for c, s in scored if s.status == "scored" and s.score < 1.0]
    failed.extend(_reference_failure(ctx))
    if not failed:
        return "outcome_mismatch"
    return min(failed, key=MODEL_FAILURES.index)


def _reference_failure(ctx: EvalContext) -> list[str]:
    """Tasks judged by their outcome (files, answer) still say how the model went wrong: it called no tool where
    the reference calls some, or never called a tool the reference needs."""
    needed = {c.name for turn in ctx.test.reference.turns for c in turn}
    if not needed:
        return []
    made = {c.name for c in ctx.all_calls}
    if not made:
        return ["no_call"]
    if ctx.test.workspace is not None:
        # Looking around is optional in a workspace task; editing and running are what the task needs.
        needed -= READ_ONLY_TOOLS
    return ["wrong_tool"] if needed - made else []
