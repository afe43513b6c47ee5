"""One result: a conversation's exchanges (every turn, every attempt) scored against its catalog test.

Shared by the pipeline (recorded cassettes) and bench.scorer.reference (a test's synthetic reference exchange).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import msgspec

from bench.catalog.model import TestSpec
from bench.core.parsed import ParsedExchange, compact_itl
from bench.scorer.checks import get_evaluator, run_check
from bench.scorer.context import Call, Turn, TurnTiming
from bench.scorer.failures import EVALUATOR_ERROR, classify, transport_failure
from bench.scorer.registry import Score
from bench.scorer.results import CallsVsReference, CheckScore, ExchangeScore, Result, Verdict
from bench.scorer.workspace_replay import evaluation_context

SETTINGS_KEYS = ("temperature", "seed", "max_tokens", "stream")


def to_int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


# Names an answer gives itself (its model, fingerprint, finish reason, tool names) are kept this long at most: they are
# the upstream's words, shown in every report's tables, and a 50 MB one kept `bench report` busy for minutes.
MAX_ANSWER_NAME = 256


def short_name(value: str | None) -> str | None:
    """`value` cut to MAX_ANSWER_NAME characters, its last one an ellipsis when cut."""
    return value if value is None or len(value) <= MAX_ANSWER_NAME else value[: MAX_ANSWER_NAME - 1] + "…"


def slim(p: ParsedExchange, cassette: str = "") -> Turn:
    """Keep what scoring and the scores file need; drop the events and raw bytes. `cassette`: where it is, as results
    name cassettes."""
    calls = tuple(
        Call(
            c.index, c.id and short_name(c.id), short_name(c.name) or "", c.arguments, c.parsed_arguments, c.valid_json
        )
        for c in p.tool_calls
    )
    return Turn(
        id=p.id,
        turn=to_int(p.tags.get("turn")),
        attempt=to_int(p.tags.get("attempt"), 1),
        endpoint=p.endpoint,
        content=p.content,
        reasoning=p.reasoning,
        calls=calls,
        finish_reason=short_name(p.finish_reason),
        findings=tuple(p.findings),
        outcome=p.outcome,
        status=p.status,
        streamed=p.streamed,
        model=short_name(p.model),
        system_fingerprint=short_name(p.system_fingerprint),
        usage=p.usage,
        timing=TurnTiming(
            ttft_us=p.timing.ttft_us,
            e2el_us=p.timing.e2el_us,
            tpot_us=p.timing.tpot_us,
            itl_us=compact_itl(p.timing.itl_us),
            output_tokens=p.timing.output_tokens,
            tokens_source=p.timing.tokens_source,
            n_events=p.timing.n_events,
            loop_lag_us=p.timing.loop_lag_us,
            started_us=p.timing.started_us,
            end_us=p.timing.end_us,
        ),
        cassette=cassette,
    )


def request_settings(p: ParsedExchange) -> dict[str, Any]:
    body = p.request_json or {}
    return {k: body.get(k) for k in SETTINGS_KEYS}


def turn_order(t: Turn) -> tuple[int, int, str, str]:
    """A conversation's exchanges in order: by turn, then attempt (ids repeat across a run's shards: the cassette
    before the id)."""
    return (t.turn, t.attempt, t.cassette, t.id)


def final_attempts(exchanges: Sequence[Turn]) -> list[Turn]:
    """The last attempt of each turn, in turn order."""
    last: dict[int, Turn] = {}
    for t in exchanges:
        held = last.get(t.turn)
        if held is None or turn_order(t) >= turn_order(held):  # (the same turn: by attempt, cassette, id)
            last[t.turn] = t
    return [last[k] for k in sorted(last)]


def exchange_entry(t: Turn, final: bool, cassette: str = "") -> ExchangeScore:
    """An exchange of a result whose cassette is `cassette` (the exchange's own is named when it is another)."""
    timing = t.timing
    return ExchangeScore(
        cassette=t.cassette if t.cassette and t.cassette != cassette else msgspec.UNSET,
        id=t.id,
        turn=t.turn,
        attempt=t.attempt,
        outcome=t.outcome,
        status=t.status,
        final=final,
        ttft_us=timing.ttft_us,
        e2el_us=timing.e2el_us,
        tpot_us=timing.tpot_us,
        itl_us=timing.itl_us or [],
        output_tokens=timing.output_tokens,
        tokens_source=timing.tokens_source,
        n_events=timing.n_events,
        loop_lag_us=timing.loop_lag_us,
        started_us=timing.started_us,
        end_us=timing.end_us,
    )


def check_entry(test: TestSpec, index: int, score: Score | None) -> CheckScore:
    check = test.checks[index]
    ev = get_evaluator(test, index, check)
    passed = None if score is None or score.status != "scored" else score.score >= 1.0
    # status: scored, skipped (nothing to judge) or error (the evaluator failed: detail says why)
    return CheckScore(
        evaluator=check.evaluator,
        version=ev.version,
        args=dict(check.args),
        weight=check.weight,
        status="skipped" if score is None else score.status,
        score=None if score is None or score.status != "scored" else round(score.score, 6),
        passed=passed,
        detail="" if score is None else score.detail,
    )


def conversation_result(exchanges: Sequence[Turn], **identity: Any) -> Result:
    """A result with what its exchanges say (served identity, findings, attempts); the caller's `identity` fields
    (run, test, model…) and the verdict are set on it."""
    ordered = sorted(exchanges, key=turn_order)
    finals = {(t.cassette, t.id) for t in final_attempts(ordered)}
    last = ordered[-1] if ordered else None
    findings = sorted({f for t in ordered if (t.cassette, t.id) in finals for f in t.findings})
    return Result(
        endpoint=last.endpoint if last else None,
        served_model=last.model if last else None,
        system_fingerprint=last.system_fingerprint if last else None,
        findings=findings,
        attempts=len(ordered),
        retries=len(ordered) - len(finals),
        exchanges=[exchange_entry(t, (t.cassette, t.id) in finals, identity.get("cassette", "")) for t in ordered],
        **identity,
    )


def calls_vs_reference(test: TestSpec, turns: Sequence[Turn]) -> CallsVsReference | None:
    """The final attempts' tool calls against the reference's, for tests that offer tools (None for the others)."""
    if not test.tools and test.workspace is None:
        return None
    made = Counter(c.name for t in turns for c in t.calls)
    wanted = Counter(c.name for calls in test.reference.turns for c in calls)
    n_made, n_ref = sum(made.values()), sum(wanted.values())
    missing, extra = sorted((wanted - made).elements()), sorted((made - wanted).elements())
    if n_made > n_ref:
        verdict = "more"
    elif n_made < n_ref:
        verdict = "fewer"
    else:
        verdict = "different" if missing or extra else "same"
    return CallsVsReference(made=n_made, reference=n_ref, verdict=verdict, missing=missing, extra=extra)


def score_conversation(test: TestSpec, exchanges: Sequence[Turn]) -> Verdict:
    """status, score, passed, failure_type and checks of one result (the caller adds identity and exchanges)."""
    turns = final_attempts(exchanges)
    calls = calls_vs_reference(test, turns)
    for turn in turns:
        failure = transport_failure(turn)
        if failure is not None:
            return Verdict(
                status="errored",
                failure_type=failure,
                checks=[check_entry(test, i, None) for i in range(len(test.checks))],
                calls=calls,
            )
    ctx = evaluation_context(test, turns)
    try:
        scores = [run_check(ctx, i, check) for i, check in enumerate(test.checks)]
        checks = [check_entry(test, i, s) for i, s in enumerate(scores)]
        if any(s.status == "error" for s in scores):
            # A check that could not be evaluated leaves the result without a verdict: errored, named, counted.
            return Verdict(status="errored", failure_type=EVALUATOR_ERROR, checks=checks)
        counted = [(c, s) for c, s in zip(test.checks, scores, strict=True) if s.status == "scored"]
        weight = sum(c.weight for c, _ in counted)
        if not counted or weight <= 0:
            return Verdict(status="skipped", checks=checks, calls=calls)
        score = round(sum(c.weight * s.score for c, s in counted) / weight, 6)
        passed = score >= test.pass_threshold
        failure = None if passed else classify(ctx, list(zip(test.checks, scores, strict=True)))
        return Verdict(status="scored", score=score, passed=passed, failure_type=failure, checks=checks, calls=calls)
    finally:
        ctx.close()
