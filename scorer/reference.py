"""`check_reference(test)`: does a test's own reference pass its checks? Used by `bench catalog validate`.

The reference (tool calls per assistant turn, then the final answer) becomes synthetic streamed exchanges
(bench.scorer.synth), goes through bench.core.parse like any recording, and is scored by the same code as `bench
rescore`."""

from __future__ import annotations

from bench.catalog.model import TestSpec
from bench.core.errors import BenchError
from bench.core.parse import parse_exchange
from bench.scorer.checks import validate_checks
from bench.scorer.context import Turn
from bench.scorer.scoring import score_conversation, slim
from bench.scorer.synth import exchange_record, sse_chunks


def reference_turns(test: TestSpec) -> list[Turn]:
    ref = test.reference
    plan: list[tuple[str, list[tuple[str, dict[str, object]]]]] = [
        ("", [(c.name, dict(c.arguments)) for c in calls]) for calls in ref.turns
    ]
    if ref.answer is not None:
        if plan and not test.multi_turn:
            # A single-turn answer that both calls tools and says something says it in the same message.
            plan[-1] = (ref.answer, plan[-1][1])
        else:
            plan.append((ref.answer, []))
    turns = []
    for i, (content, calls) in enumerate(plan):
        tags = {"run": "reference", "test": test.id, "model": "reference", "epoch": "0", "turn": str(i), "attempt": "1"}
        record = exchange_record(sse_chunks(content, calls), id=f"x{i}", tags=tags)
        turns.append(slim(parse_exchange(record)))
    return turns


def check_reference(test: TestSpec) -> list[str]:
    """Problems found, one line each; empty when the reference passes every check."""
    try:
        validate_checks(test)
    except BenchError as exc:
        return [str(exc)]
    if not test.checks:
        return [f"test {test.id}: no checks; add at least one"]
    turns = reference_turns(test)
    if not turns:
        return [f"test {test.id}: no reference answer or tool calls to check the checks against"]
    try:
        result = score_conversation(test, turns)
    except BenchError as exc:
        return [str(exc)]
    if result.status == "scored" and result.passed:
        return []
    if result.status == "skipped":
        return []  # e.g. no C compiler here: nothing to say about the test itself
    problems = [
        f"test {test.id}: reference fails check {i + 1} ({c.evaluator}): {c.detail}"
        for i, c in enumerate(result.checks)
        if c.status == "scored" and not c.passed
    ]
    return problems or [
        f"test {test.id}: reference scores {result.score} < pass_threshold {test.pass_threshold}"
        f" ({result.status}, {result.failure_type})"
    ]
