"""One result as the browser shows it: the conversation turn by turn, the checks, and each exchange's timeline."""

from __future__ import annotations

from typing import Any

import msgspec
import orjson

from bench.core.cassette import records
from bench.core.parse import parse_exchange
from bench.scorer.results import CallsVsReference, ExchangeScore
from bench.view.index import UNTAGGED, Index, Row
from bench.view.timeline import Timeline, timeline


class Turn(msgspec.Struct):
    role: str
    text: str = ""
    reasoning: str = ""
    tool_calls: list[dict[str, str]] = msgspec.field(default_factory=list)  # name, pretty-printed arguments
    name: str = ""  # a tool result's tool name or call id


class Exchange(msgspec.Struct):
    id: str
    attempt: int | None
    turn: int | None
    final: bool
    status: int | None
    outcome: str
    endpoint: str
    conversation: list[Turn]
    timeline: Timeline
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
    checks: list[Check]
    findings: list[str]
    exchanges: list[Exchange]
    missing: list[str]  # exchange ids the scores name but the cassette no longer holds
    calls: CallsVsReference | None = None  # the tool calls against the reference solution's


def _pretty(arguments: Any) -> str:
    if isinstance(arguments, str):
        text: str = arguments
        try:
            arguments = orjson.loads(text)
        except orjson.JSONDecodeError:
            return text
    return orjson.dumps(arguments, option=orjson.OPT_INDENT_2).decode()


def _content(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # content parts
        return "".join(str(p.get("text") or p.get("content") or "") if isinstance(p, dict) else str(p) for p in value)
    return "" if value is None else str(value)


def _request_turns(request: dict[str, Any] | None) -> list[Turn]:
    if not request:
        return []
    turns: list[Turn] = []
    if isinstance(request.get("instructions"), str):
        turns.append(Turn(role="system", text=request["instructions"]))
    items = request.get("messages")
    if items is None:
        items = request.get("input")
    if isinstance(items, str):
        return [*turns, Turn(role="user", text=items)]
    if isinstance(request.get("prompt"), str):
        return [*turns, Turn(role="user", text=request["prompt"])]
    for item in items or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "function_call":
            turns.append(Turn(role="assistant", tool_calls=[_call(item.get("name"), item.get("arguments"))]))
        elif kind == "function_call_output":
            turns.append(Turn(role="tool", text=_content(item.get("output")), name=str(item.get("call_id") or "")))
        else:
            calls = [
                _call((c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments"))
                for c in item.get("tool_calls") or []
                if isinstance(c, dict)
            ]
            turns.append(
                Turn(
                    role=str(item.get("role") or kind or "?"),
                    text=_content(item.get("content")),
                    tool_calls=calls,
                    name=str(item.get("name") or item.get("tool_call_id") or ""),
                )
            )
    return turns


def _call(name: Any, arguments: Any) -> dict[str, str]:
    return {"name": str(name or ""), "arguments": _pretty(arguments if arguments is not None else {})}


def _exchange(entry: ExchangeScore, record: records.Exchange, scored: bool) -> Exchange:
    parsed = parse_exchange(record, keep_events=True)
    answer = Turn(
        role="assistant",
        text=parsed.content or parsed.refusal,
        reasoning=parsed.reasoning,
        tool_calls=[_call(c.name, c.arguments) for c in parsed.tool_calls],
    )
    return Exchange(
        id=parsed.id,
        # Untagged traffic has no turns or attempts (an agent session's exchanges are its turns).
        attempt=entry.attempt if scored else None,
        turn=entry.turn if scored else None,
        final=entry.final,
        status=parsed.status,
        outcome=parsed.outcome,
        endpoint=parsed.endpoint,
        conversation=[*_request_turns(parsed.request_json), answer],
        timeline=timeline(parsed),
        findings=list(parsed.findings),
        error=parsed.error,
    )


def detail(index: Index, n: int) -> Detail:
    result = index.result(n)
    records = index.records(n)
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
    return Detail(
        row=index.rows[n],
        checks=checks,
        findings=list(result.findings),
        exchanges=[
            _exchange(e, records[e.id], result.run != UNTAGGED or len(entries) > 1) for e in entries if e.id in records
        ],
        missing=[e.id for e in entries if e.id not in records],
        calls=result.calls,
    )


def raw_stream(index: Index, n: int, exchange_id: str) -> bytes | None:
    """The exchange's response bytes exactly as recorded (the SSE stream), or None when it is not this result's."""
    records = index.records(n)
    record = records.get(exchange_id)
    if record is None:
        return None
    return b"".join(record.response.chunks)
