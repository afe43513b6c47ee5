"""Traffic recorded by other tools as typed exchanges (bench.core.imported): OpenAI-format request logs and
OpenTelemetry GenAI traces in OTLP JSON, each request with its recorded offset (what a load workload sends again) and
its answer (what a drafted test keeps). Files are written by hand here, in each format's own shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.core.errors import BenchError
from bench.core.imported import ImportedCall
from bench.core.traffic_files import imported_exchanges


def _write(path: Path, lines: list[Any]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_request_logs_in_their_three_shapes_with_times_and_answers(tmp_path: Path) -> None:
    chat = {"model": "gpt-x", "messages": [{"role": "user", "content": "Hi"}]}
    log = _write(
        tmp_path / "log.jsonl",
        [
            {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": chat, "timestamp": 1700000002},
            {
                "request": {"model": "gpt-x", "input": "Weather?"},
                "response": {
                    "status": "completed",
                    "output": [
                        {
                            "type": "function_call",
                            "name": "get_weather",
                            "arguments": '{"city":"Oslo"}',
                            "call_id": "call_1",
                        }
                    ],
                },
                "start_time": "2023-11-14T22:13:20.500Z",
                "session_id": "s1",
            },
            {
                **chat,
                "response": {"choices": [{"message": {"content": "Hello"}, "finish_reason": "stop"}]},
                "created": 1700000000000,
            },
        ],
    )
    found = imported_exchanges([log])
    # Ordered by time: ms since the epoch, ISO 8601, then seconds; offsets from the first.
    assert [e.origin for e in found] == ["log.jsonl:3", "log.jsonl:2", "log.jsonl:1"]
    assert [e.at_us for e in found] == [0, 500_000, 2_000_000]
    assert [e.path for e in found] == ["/v1/chat/completions", "/v1/responses", "/v1/chat/completions"]
    assert orjson.loads(found[0].body) == chat  # the answer beside the body is not part of the request
    assert found[0].answer is not None and found[0].answer.content == "Hello"
    assert found[1].answer is not None and found[1].answer.tool_calls == (
        ImportedCall("get_weather", '{"city":"Oslo"}', "call_1"),
    )
    assert found[1].session == "s1" and found[1].model == "gpt-x"
    assert found[2].answer is None and found[2].method == "POST"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json\n", "log.jsonl: not JSON"),
        ("[1, 2]\n", "log.jsonl:1: not a JSON object"),
        ('{"model": "m"}\n', "log.jsonl:1: no request in it (messages, input or prompt"),
    ],
)
def test_a_line_that_is_no_request_is_named(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text(text)
    with pytest.raises(BenchError) as info:
        imported_exchanges([path])
    assert str(info.value).startswith(f"{tmp_path}/{message}" if message.startswith("log") else message)


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    if isinstance(value, list):
        return {"key": key, "value": {"arrayValue": {"values": [{"stringValue": v} for v in value]}}}
    return {"key": key, "value": {"stringValue": value}}


def _span(start_ns: int, attrs: dict[str, Any], trace: str = "ab" * 16) -> dict[str, Any]:
    return {
        "traceId": trace,
        "spanId": "cd" * 8,
        "name": "chat m",
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(start_ns + 10),
        "attributes": [_attr(k, v) for k, v in attrs.items()],
    }


def test_otlp_json_spans_current_and_indexed_attributes_written_pretty(tmp_path: Path) -> None:
    current = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m",
        "gen_ai.request.temperature": 0.5,
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Be brief."}]),
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Hi"}]}]),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "f", "arguments": {"x": 1}}]}]
        ),
        "gen_ai.tool.definitions": json.dumps([{"type": "function", "name": "f", "parameters": {"type": "object"}}]),
        "gen_ai.conversation.id": "conv-9",
    }
    indexed = {
        "gen_ai.system": "openai",
        "gen_ai.request.model": "m",
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": "Bye",
        "gen_ai.completion.0.content": "Goodbye",
        "gen_ai.response.finish_reasons": ["stop"],
    }
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.request.model": "m"}  # not a model call
    doc = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            _span(3_000_000_000, indexed, trace="ef" * 16),
                            _span(1_000_000_000, current),
                            _span(2_000_000_000, agent),
                        ]
                    }
                ]
            }
        ]
    }
    path = tmp_path / "traces.json"
    path.write_text(json.dumps(doc, indent=2))  # one document over many lines
    first, second = imported_exchanges([path])
    assert (first.at_us, second.at_us) == (0, 2_000_000)
    assert orjson.loads(first.body) == {
        "model": "m",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        "temperature": 0.5,
    }
    assert first.session == "conv-9" and first.answer is not None
    assert first.answer.tool_calls == (ImportedCall("f", '{"x": 1}', "c1"),)
    assert orjson.loads(second.body)["messages"] == [{"role": "user", "content": "Bye"}]
    assert second.session == "trace:" + "ef" * 16
    assert second.answer is not None and (second.answer.content, second.answer.finish_reason) == ("Goodbye", "stop")


def test_a_file_with_no_llm_request_says_so(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.jsonl", [{"resourceSpans": []}])
    with pytest.raises(BenchError, match="no LLM requests in it"):
        imported_exchanges([path])
    with pytest.raises(BenchError, match="cannot read it"):
        imported_exchanges([tmp_path / "missing.jsonl"])
