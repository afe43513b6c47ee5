"""Every failed result gets exactly one failure type; exchanges go through the real parser (bench.core.parse)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.catalog.model import Check, Limits
from bench.core.parse import parse_exchange
from bench.scorer.failures import FAILURE_TYPES, MODEL_FAILURES, TRANSPORT
from bench.scorer.scoring import score_conversation, slim
from bench.scorer.synth import exchange_record, sse_chunks
from tests.scorer.helpers import TIME_TOOL, WEATHER_TOOL, parsed_turn, spec

TOOLS = (WEATHER_TOOL, TIME_TOOL)
WEATHER = ("get_weather", {"city": "Paris"})
TIME = ("get_time", {"tz": "UTC"})
CALLED_WEATHER = Check("tool_called", {"name": "get_weather"})
IN_PARIS = Check("tool_args", {"name": "get_weather", "args": {"city": "Paris"}})


def conv(*turns: tuple[str, list[tuple[str, Any]]]) -> list[Any]:
    return [parsed_turn(content, calls, turn=str(i)) for i, (content, calls) in enumerate(turns)]


CASES: list[tuple[str, list[Check], list[tuple[str, list[tuple[str, Any]]]], dict[str, Any]]] = [
    ("invalid_json", [IN_PARIS], [("", [("get_weather", '{"city": "Paris"')])], {}),
    ("text_tool_call", [CALLED_WEATHER], [('<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>', [])], {}),
    ("unknown_tool", [CALLED_WEATHER], [("", [("get_stock", {"s": "X"})])], {}),
    ("invalid_args", [IN_PARIS], [("", [("get_weather", {"town": "Paris"})])], {}),
    (
        "call_limit",
        [Check("equals", {"value": "done"})],
        [("", [WEATHER]), ("", [WEATHER])],
        {"limits": Limits(max_turns=5, max_calls=2)},
    ),
    ("no_call", [CALLED_WEATHER], [("It is sunny.", [])], {}),
    ("unneeded_call", [Check("no_tool_call", {})], [("", [WEATHER])], {}),
    (
        "not_parallel",
        [Check("parallel_calls", {"names": ["get_weather", "get_time"]})],
        [("", [WEATHER]), ("", [TIME]), ("ok", [])],
        {"limits": Limits(max_turns=5, max_calls=5)},
    ),
    (
        "wrong_tool",
        [CALLED_WEATHER, Check("tool_args", {"name": "get_weather", "args": {"city": "Paris"}})],
        [("", [TIME])],
        {},
    ),
    ("too_few_calls", [Check("call_count", {"name": "get_weather", "min": 2})], [("", [WEATHER])], {}),
    ("wrong_args", [Check("tool_args", {"name": "get_weather", "args": {"city": "Lyon"}})], [("", [WEATHER])], {}),
    ("outcome_mismatch", [Check("equals", {"value": "Paris"})], [("Lyon", [])], {}),
]


@pytest.mark.parametrize(("expected", "checks", "turns", "extra"), CASES, ids=[c[0] for c in CASES])
def test_model_failure_types(expected: str, checks: list[Check], turns: Any, extra: dict[str, Any]) -> None:
    test = spec(checks, tools=TOOLS, **extra)
    result = score_conversation(test, conv(*turns))
    assert result.status == "scored" and result.passed is False
    assert result.failure_type == expected


def test_every_type_is_covered_here_or_in_replay() -> None:
    # patch_failed: tests/scorer/test_workspace_replay.py; max_tokens: below
    covered = {c[0] for c in CASES} | {"patch_failed", "max_tokens"}
    assert covered == set(MODEL_FAILURES)
    assert set(FAILURE_TYPES) == set(MODEL_FAILURES) | set(TRANSPORT) | {"evaluator_error"}


def test_passing_result_has_no_failure_type() -> None:
    result = score_conversation(spec([CALLED_WEATHER], tools=TOOLS), conv(("", [WEATHER])))
    assert result.passed is True and result.failure_type is None


@pytest.mark.parametrize(
    ("outcome", "status", "expected"),
    [
        ("upstream_error", 502, "upstream_error"),
        ("timeout", None, "timeout"),
        ("truncated", 200, "truncated_stream"),
        ("client_disconnected", 200, "client_disconnect"),
        ("complete", 500, "upstream_error"),
        ("complete", 429, "upstream_error"),
    ],
)
def test_transport_failures_are_errored(outcome: str, status: int | None, expected: str) -> None:
    record = exchange_record(sse_chunks("Paris"), tags={"turn": "0"}, outcome=outcome, status=status)
    result = score_conversation(spec([Check("equals", {"value": "Paris"})]), [slim(parse_exchange(record))])
    assert result.status == "errored" and result.failure_type == expected
    assert result.score is None and result.passed is None


def test_cut_stream_without_done_is_truncated() -> None:
    record = exchange_record(sse_chunks("Paris")[:3], tags={"turn": "0"})
    result = score_conversation(spec([Check("equals", {"value": "Paris"})]), [slim(parse_exchange(record))])
    assert result.failure_type == "truncated_stream"


def _finished(content: str, calls: list[tuple[str, Any]], finish: bytes) -> Any:
    """A stream whose last choice chunk says `finish` (a JSON value) instead of its finish_reason."""
    chunks = [
        c.replace(b'"finish_reason":"stop"', b'"finish_reason":' + finish).replace(
            b'"finish_reason":"tool_calls"', b'"finish_reason":' + finish
        )
        for c in sse_chunks(content, calls)
    ]
    return parse_exchange(exchange_record(chunks, tags={"turn": "0", "attempt": "1"}))


def test_an_answer_stopped_at_the_token_limit_is_its_own_finding_and_failure_type() -> None:
    # The arguments are cut mid-object by the limit: invalid JSON follows from it, max_tokens is the cause.
    parsed = _finished("", [("get_weather", '{"city": "Par')], b'"length"')
    assert "max_tokens" in parsed.findings and parsed.finish_reason == "length"
    result = score_conversation(spec([IN_PARIS], tools=TOOLS), [slim(parsed)])
    assert (result.status, result.failure_type) == ("scored", "max_tokens")
    # A passing answer that stopped at the limit keeps the finding (reports count it) and no failure type.
    whole = _finished("Paris", [], b'"length"')
    passed = score_conversation(spec([Check("equals", {"value": "Paris"})]), [slim(whole)])
    assert passed.passed is True and passed.failure_type is None and "max_tokens" in whole.findings


def test_a_stream_ended_without_a_finish_reason_is_found_not_taken_as_complete() -> None:
    parsed = _finished("Par", [], b"null")
    assert parsed.outcome == "complete" and parsed.finish_reason is None
    assert "no_finish_reason" in parsed.findings and "truncated" not in parsed.findings
    assert "no_finish_reason" not in _finished("Paris", [], b'"stop"').findings
