"""One result = one transcript: each message once, in order, and each model call where it was made; requests that
retry, rewrite or chain the conversation said as such."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp.test_utils import TestClient, TestServer

from bench.core.cassette import CassetteReader
from bench.view.index import Index
from bench.view.transcript import Message, ToolCall, Transcript
from bench.view.web_app import make_app

SYSTEM = {"role": "system", "content": "Be brief."}
USER = {"role": "user", "content": "Fix it."}
RUN = {"id": "c1", "type": "function", "function": {"name": "run", "arguments": '{"cmd": "make"}'}}
CALL = {"role": "assistant", "content": None, "tool_calls": [RUN]}
RESULT = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
SAID_CALL = Message(role="assistant", tool_calls=[ToolCall(name="run", arguments='{\n  "cmd": "make"\n}', id="c1")])
DONE = Message(role="assistant", text="Done.")


def _roles(messages: list[Message]) -> list[str]:
    return [m.role for m in messages]


def test_a_growing_conversation_adds_only_what_is_new_and_names_tool_results() -> None:
    t = Transcript()
    assert _roles(t.add({"messages": [SYSTEM, USER]}, SAID_CALL)[0]) == ["system", "user"]
    new, rewritten = t.add({"messages": [SYSTEM, USER, CALL, RESULT]}, DONE)
    # The call sent back is the first answer, shown once (as that call's answer): only the tool's result is new.
    assert not rewritten and _roles(new) == ["tool"] and new[0].text == "ok" and new[0].name == "run · c1"


def test_a_retry_adds_nothing_and_a_rewritten_history_is_said() -> None:
    t = Transcript()
    t.add({"messages": [SYSTEM, USER]}, DONE)
    assert t.add({"messages": [SYSTEM, USER]}, DONE) == ([], False)
    new, rewritten = t.add({"messages": [USER, {"role": "user", "content": "again"}]}, DONE)
    assert rewritten and [m.text for m in new] == ["Fix it.", "again"]


def test_an_answer_sent_back_changed_is_kept_and_chained_responses_add_their_input() -> None:
    t = Transcript()
    t.add({"messages": [USER]}, DONE)
    new, _ = t.add({"messages": [USER, {"role": "assistant", "content": "Not what it said."}, USER]}, DONE)
    assert [m.text for m in new] == ["Not what it said.", "Fix it."]
    t = Transcript()
    t.add({"instructions": "Be brief.", "input": "Fix it."}, DONE)
    new, rewritten = t.add({"previous_response_id": "resp_1", "input": [{"role": "user", "content": "More."}]}, DONE)
    assert not rewritten and [m.text for m in new] == ["More."]


def _sequence(messages: list[dict[str, Any]]) -> list[tuple[str, str, list[str]]]:
    """(role, text, tool call names) of request messages, read straight from the recorded JSON."""
    return [
        (m["role"], m.get("content") or "", [c["function"]["name"] for c in m.get("tool_calls") or []])
        for m in messages
    ]


async def test_a_five_call_agent_result_shows_each_message_once(demo_index: Index) -> None:
    row = next(r for r in demo_index.rows if r.test == "agent.fix_all" and r.model == "oracle")
    result = demo_index.result(row.n)
    assert len(result.exchanges) == 5
    cassette = demo_index._locate(row.source, result.cassette)
    recorded = {e.id: e for e in CassetteReader(cassette) if e.id in {x.id for x in result.exchanges}}
    final = orjson.loads(recorded[result.exchanges[-1].id].request.body)["messages"]
    async with TestClient(TestServer(make_app(demo_index))) as client:
        key = {"run": row.run, "model": row.model, "test": row.test, "epoch": "0"}
        body = await (await client.get("/api/result", params=key)).json()
    shown = []
    for call in body["exchanges"]:
        for m in [*call["messages"], call["answer"]]:
            shown.append((m["role"], m["text"], [c["name"] for c in m["tool_calls"]]))
    # Every message of the last request once, in its order, each answer where the model gave it, then the last answer.
    assert shown[:-1] == _sequence(final)
    assert shown[-1][0] == "assistant" and shown[-1][1]
    assert sum(len(call["messages"]) for call in body["exchanges"]) + 5 == len(final) + 1
