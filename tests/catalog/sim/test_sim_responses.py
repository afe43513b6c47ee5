"""The simulator speaks the Responses API, legacy Completions and Embeddings: the real openai SDK against it, through
a recording `bench proxy`, and the cassette parsed back to what the SDK saw."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI, RateLimitError

from bench.catalog.model import Catalog
from bench.catalog.sim import start_sim
from bench.core.cassette import CassetteReader, find_cassettes
from bench.core.cassette.records import Exchange
from bench.core.parse import parse_exchange
from bench.core.responses_request import responses_from_chat
from bench.proxy.server import start_proxy
from tests.catalog.conftest import TIME, WEATHER


def responses_args(catalog: Catalog, test_id: str, tools: list[Any]) -> dict[str, Any]:
    body = responses_from_chat({"model": "oracle", "messages": list(catalog.tests[test_id].messages), "tools": tools})
    return {"input": body["input"], **({"tools": body["tools"]} if tools else {})}


def exchanges(folder: Path) -> list[Exchange]:
    return [r for path in find_cassettes([folder]) for r in CassetteReader(path)]


async def test_sdk_responses_streamed_and_not_with_tools_through_the_proxy(mini: Catalog, tmp_path: Path) -> None:
    async with (
        await start_sim(catalog=mini) as sim,
        await start_proxy(upstream=sim.url, cassettes=tmp_path) as proxy,
    ):
        client = AsyncOpenAI(base_url=proxy.url + "/v1", api_key="sk-any", max_retries=0)
        # Streamed, two function tools, the oracle calls both (the parallel test).
        stream = await client.responses.create(
            model="oracle", stream=True, **responses_args(mini, "t.parallel", [WEATHER, TIME])
        )
        kinds: list[str] = []
        arg_deltas = 0
        final = None
        async for ev in stream:
            kinds.append(ev.type)
            if ev.type == "response.function_call_arguments.delta":
                arg_deltas += 1
            if ev.type == "response.completed":
                final = ev.response
        assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
        assert final is not None and final.usage is not None and final.usage.output_tokens > 0
        calls = [item for item in final.output if item.type == "function_call"]
        assert [(c.name, json.loads(c.arguments)) for c in calls] == [  # type: ignore[union-attr]
            ("get_weather", {"city": "Oslo"}),
            ("get_time", {"city": "Oslo"}),
        ]
        assert arg_deltas > len(calls)
        # Not streamed: the text answer, as output_text.
        text = await client.responses.create(model="oracle", **responses_args(mini, "t.text", []))
        assert text.output_text == mini.tests["t.text"].reference.answer
        assert text.status == "completed" and text.usage is not None
        # A plain string input, outside the catalog, and a function tool: the generic model calls it.
        generic = await client.responses.create(
            model="oracle", input="What is the weather?", tools=responses_args(mini, "t.tool", [WEATHER])["tools"]
        )
        assert [o.type for o in generic.output] == ["function_call"]
        # Legacy completions (streamed) and embeddings.
        comp = await client.completions.create(model="oracle", prompt="Say hi", stream=True)
        pieces = [c.choices[0].text async for c in comp if c.choices]
        assert "".join(pieces).startswith("Hello from the bench simulator")
        emb = await client.embeddings.create(model="oracle", input=["a", "b"])
        assert len(emb.data) == 2 and len(emb.data[0].embedding) == 8
        assert emb.data[0].embedding != emb.data[1].embedding
    records = sorted(exchanges(tmp_path), key=lambda r: r.started)
    parsed = [parse_exchange(r) for r in records]
    assert [p.endpoint for p in parsed] == ["responses", "responses", "responses", "completions", "embeddings"]
    assert [r.outcome for r in records] == ["complete"] * 5
    first = parsed[0]
    assert [(c.name, c.parsed_arguments) for c in first.tool_calls] == [
        ("get_weather", {"city": "Oslo"}),
        ("get_time", {"city": "Oslo"}),
    ]
    assert first.finish_reason == "tool_calls" and first.findings == []
    assert first.timing.ttft_us is not None and first.timing.tokens_source == "usage"
    assert records[0].timing.first_token is not None
    assert parsed[1].content == mini.tests["t.text"].reference.answer and parsed[1].finish_reason == "stop"
    assert parsed[3].content.startswith("Hello from the bench simulator") and parsed[3].finish_reason == "stop"
    assert parsed[4].usage is not None and parsed[4].timing.e2el_us is not None


async def test_faults_on_the_responses_api(mini: Catalog, tmp_path: Path) -> None:
    async with (
        await start_sim(catalog=mini) as sim,
        await start_proxy(upstream=sim.url, cassettes=tmp_path) as proxy,
    ):
        client = AsyncOpenAI(base_url=proxy.url + "/v1", api_key="sk-any", max_retries=0)
        args = responses_args(mini, "t.text", [])
        with pytest.raises(RateLimitError):
            await client.responses.create(model="oracle+429!", **args)
        cut = await client.responses.create(model="oracle+truncate!", stream=True, **args)
        seen = [ev.type async for ev in cut]
        assert "response.completed" not in seen
        empty = await client.responses.create(model="oracle+empty!", **args)
        assert empty.output == []
        short = await client.responses.create(model="oracle", max_output_tokens=2, stream=True, **args)
        assert [ev.type async for ev in short][-1] == "response.incomplete"
    parsed = {(p.request_json or {})["model"]: p for p in (parse_exchange(r) for r in exchanges(tmp_path))}
    assert "http_error" in parsed["oracle+429!"].findings
    assert "truncated" in parsed["oracle+truncate!"].findings
    assert "empty_output" in parsed["oracle+empty!"].findings
    assert parsed["oracle"].finish_reason == "length" and len(parsed["oracle"].content.split()) == 2
