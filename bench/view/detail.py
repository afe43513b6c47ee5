"""One result as the browser shows it: what it is, its checks, and its transcript (each message once, each model
call in place with its request, answer, timeline, tokens, cost and raw bytes)."""

from __future__ import annotations

from typing import Any

import msgspec

from bench.core.cassette import records
from bench.core.parse import parse_exchange
from bench.core.usage import usage_tokens
from bench.scorer.caveats import INTERRUPTED, MAX_TOKENS, NO_FINISH, REPLAYED
from bench.scorer.report.cost import Prices, price_of
from bench.scorer.results import CallsVsReference, ExchangeScore
from bench.view.index import UNTAGGED, Index, Row
from bench.view.request_view import RequestView, request_view
from bench.view.timeline import Timeline, timeline
from bench.view.transcript import Message, Transcript, answer


class Tokens(msgspec.Struct):
    input: int | None = None
    cached_input: int | None = None
    output: int | None = None
    output_source: str | None = None  # "usage" (the server said) or "counted" (from the stream)


class Exchange(msgspec.Struct):
    """One model call: the messages its request added, the call itself, and its answer."""

    id: str
    attempt: int | None
    turn: int | None
    final: bool
    status: int | None
    outcome: str
    endpoint: str
    model: str  # as requested
    served_model: str | None
    messages: list[Message]  # new to the transcript with this request (shown before the call)
    rewritten: bool  # the request did not extend the previous one's messages: `messages` are all of them
    answer: Message
    request: RequestView
    timeline: Timeline
    tokens: Tokens
    cost: float | None  # with --prices, when the model is priced
    response_bytes: int  # the response body as recorded (what the raw link returns)
    findings: list[str]
    error: str | None


class Check(msgspec.Struct):
    evaluator: str
    args: Any
    passed: bool | None
    score: float | None
    weight: float | None
    reason: str


class Detail(msgspec.Struct):
    row: Row
    notes: list[str]  # what the result is, when its verdict alone would mislead (errored, untagged, interrupted...)
    checks: list[Check]
    findings: list[str]
    exchanges: list[Exchange]
    missing: list[str]  # exchange ids the scores name but the cassette no longer holds
    calls: CallsVsReference | None = None  # the tool calls against the reference solution's
    currency: str | None = None  # of `cost`, with --prices


def _tokens(parsed: Any) -> Tokens:
    said = usage_tokens(parsed.usage)
    if said.output is not None:
        return Tokens(said.input, said.cached_input, said.output, "usage")
    counted = parsed.timing.output_tokens
    return Tokens(said.input, said.cached_input, counted, None if counted is None else parsed.timing.tokens_source)


def _cost(prices: Prices | None, model: str, served: str | None, tokens: Tokens) -> float | None:
    found = prices.find(model, served) if prices is not None else None
    if found is None or (tokens.input is None and tokens.output is None):
        return None
    return price_of(found[1], tokens.input or 0, tokens.cached_input or 0, tokens.output or 0)


def _exchanges(
    entries: list[ExchangeScore], found: dict[str, records.Exchange], scored: bool, prices: Prices | None
) -> list[Exchange]:
    transcript = Transcript()
    out = []
    for entry in entries:
        record = found.get(entry.id)
        if record is None:
            continue
        parsed = parse_exchange(record, keep_events=True)
        said = answer(parsed)
        body = parsed.request_json
        new, rewritten = transcript.add(body, said)
        model = str((body or {}).get("model") or parsed.tags.get("model") or "")
        tokens = _tokens(parsed)
        out.append(
            Exchange(
                id=parsed.id,
                attempt=entry.attempt if scored else None,
                turn=entry.turn if scored else None,
                final=entry.final,
                status=parsed.status,
                outcome=parsed.outcome,
                endpoint=parsed.endpoint,
                model=model[:200],
                served_model=parsed.model,
                messages=new,
                rewritten=rewritten,
                answer=said,
                request=request_view(record),
                timeline=timeline(parsed),
                tokens=tokens,
                cost=_cost(prices, model, parsed.model, tokens),
                response_bytes=sum(len(c) for c in record.response.chunks),
                findings=list(parsed.findings),
                error=parsed.error or _error_body(parsed.status, record),
            )
        )
    return out


def _error_body(status: int | None, record: records.Exchange) -> str | None:
    """An error answer's body as text when the parser found no error message in it (not JSON, another shape)."""
    if status is None or status < 400:
        return None
    body = b"".join(record.response.chunks)[:2000].decode("utf-8", "replace").strip()
    return f"HTTP {status}: {body}" if body else None


def notes(row: Row, exchanges: list[Exchange]) -> list[str]:
    """What the result is, in words, when its verdict alone would mislead."""
    out = []
    if row.run == UNTAGGED:
        what = f"an agent session of {len(exchanges)} exchanges" if len(exchanges) > 1 else "this exchange"
        out.append(f"untagged traffic: no catalog test and no --rules rule scored {what}; it is shown as recorded")
    elif row.status == "errored":
        last = exchanges[-1] if exchanges else None
        why = f" (HTTP {last.status}, {last.outcome}{': ' + last.error if last.error else ''})" if last else ""
        out.append(f"errored in transport{why}: no verdict; left out of pass rates, as in the reports")
    elif row.status != "scored":
        out.append(f"not scored ({row.status}): no verdict")
    words = {
        INTERRUPTED: "its run was interrupted before it finished (or its cassette was cut short): tests may be missing",
        REPLAYED: "its timing was replayed from a recording by a replaying proxy, not measured",
        MAX_TOKENS: "its answer stopped at the token limit (max_tokens)",
        NO_FINISH: "its stream ended without a finish_reason: cut, though recorded complete",
    }
    out.extend(words[f] for f in row.flags if f in words)
    return out


def detail(index: Index, n: int) -> Detail:
    result = index.result(n)
    found = index.records(n)
    entries = result.exchanges
    checks = [
        Check(
            evaluator=c.evaluator,
            args=c.args,
            passed=c.passed,
            score=c.score,
            weight=c.weight,
            reason=c.detail or c.status,
        )
        for c in result.checks
    ]
    row = index.rows[n]
    # Untagged traffic has no turns or attempts (an agent session's exchanges are its turns).
    exchanges = _exchanges(entries, found, result.run != UNTAGGED or len(entries) > 1, index.prices)
    return Detail(
        row=row,
        notes=notes(row, exchanges),
        checks=checks,
        findings=list(result.findings),
        exchanges=exchanges,
        missing=[e.id for e in entries if e.id not in found],
        calls=result.calls,
        currency=index.prices.currency if index.prices is not None else None,
    )


def one_call(record: records.Exchange, prices: Prices | None) -> Exchange:
    """One exchange on its own (a live flow): its request's messages, its answer, timeline and figures."""
    (call,) = _exchanges([ExchangeScore(id=record.id)], {record.id: record}, False, prices)
    return call


def raw_bytes(index: Index, n: int, exchange_id: str, part: str = "response") -> bytes | None:
    """The exchange's response bytes exactly as recorded (the SSE stream), or its request body; None when the
    exchange is not this result's."""
    record = index.records(n).get(exchange_id)
    if record is None:
        return None
    return record.request.body if part == "request" else b"".join(record.response.chunks)
