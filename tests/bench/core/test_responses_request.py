from __future__ import annotations

from typing import Any

from bench.core.responses_request import chat_from_responses, responses_from_chat
from bench.scorer.checked_catalog import load_catalog

CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Rome and Oslo?"},
    {
        "role": "assistant",
        "content": "Checking.",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    {"role": "tool", "tool_call_id": "call_2", "content": "snow"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_3", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}],
    },
    {"role": "tool", "tool_call_id": "call_3", "content": "noon"},
]


def test_a_multi_turn_tool_conversation_round_trips() -> None:
    chat = {
        "model": "m",
        "messages": CONVERSATION,
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "max_tokens": 64,
        "seed": 7,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.0,
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}},
    }
    resp = responses_from_chat(chat)
    assert "seed" not in resp and "stream_options" not in resp and "messages" not in resp
    assert resp["max_output_tokens"] == 64 and resp["tool_choice"] == {"type": "function", "name": "get_weather"}
    assert resp["tools"] == [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
    assert resp["text"] == {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}}}
    assert [i.get("type", i.get("role")) for i in resp["input"]] == [
        "system",
        "user",
        "assistant",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "function_call",
        "function_call_output",
    ]
    back = chat_from_responses(resp)
    assert back["messages"] == CONVERSATION
    assert back["tools"] == chat["tools"] and back["tool_choice"] == chat["tool_choice"]
    assert back["max_tokens"] == 64 and back["response_format"] == chat["response_format"]


def test_every_catalog_request_round_trips() -> None:
    catalog = load_catalog(None)
    for test in catalog.tests.values():
        chat = {"model": "m", "messages": [dict(m) for m in test.messages], "tools": list(test.tools)}
        back = chat_from_responses(responses_from_chat(chat))
        assert back["messages"] == chat["messages"], test.id
        assert back.get("tools", []) == chat["tools"], test.id


def test_instructions_and_string_input() -> None:
    back = chat_from_responses({"model": "m", "instructions": "Be kind.", "input": "hi", "max_output_tokens": 5})
    assert back["messages"] == [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "hi"}]
    assert back["max_tokens"] == 5
    parts = chat_from_responses(
        {
            "input": [
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}],
                }
            ]
        }
    )
    assert parts["messages"] == [{"role": "user", "content": "ab"}]
