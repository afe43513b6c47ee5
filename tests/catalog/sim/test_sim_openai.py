"""The simulator speaks OpenAI: the real openai SDK streams text and tool calls from it."""

from __future__ import annotations

import json

import pytest
from openai import AsyncOpenAI, NotFoundError, RateLimitError

from bench.catalog.model import Catalog
from bench.catalog.sim import start_sim
from tests.catalog.conftest import TIME, WEATHER


async def test_sdk_streams_the_oracle_answer_and_tool_calls(mini: Catalog) -> None:
    async with await start_sim(catalog=mini) as sim:
        client = AsyncOpenAI(base_url=sim.base_url, api_key="sk-any", max_retries=0)
        text = mini.tests["t.text"]
        stream = await client.chat.completions.create(
            model="oracle", messages=list(text.messages), stream=True, stream_options={"include_usage": True}
        )
        parts, usage, fingerprints = [], None, set()
        async for chunk in stream:
            fingerprints.add(chunk.system_fingerprint)
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                parts.append(choice.delta.content or "")
        assert "".join(parts) == text.reference.answer
        assert usage is not None and usage.completion_tokens == len("".join(parts).split())
        assert fingerprints == {"fp_bench_sim_1"}

        par = mini.tests["t.parallel"]
        stream = await client.chat.completions.create(
            model="oracle", messages=list(par.messages), tools=[WEATHER, TIME], stream=True
        )
        calls: dict[int, dict[str, str]] = {}
        finish = None
        fragments = 0
        async for chunk in stream:
            for choice in chunk.choices:
                finish = choice.finish_reason or finish
                for tc in choice.delta.tool_calls or []:
                    fragments += 1
                    slot = calls.setdefault(tc.index, {"name": "", "arguments": ""})
                    if tc.function and tc.function.name:
                        slot["name"] = tc.function.name
                    if tc.function and tc.function.arguments:
                        slot["arguments"] += tc.function.arguments
        assert finish == "tool_calls"
        assert fragments > len(calls) * 2  # arguments arrive in several fragments
        assert [calls[i]["name"] for i in sorted(calls)] == ["get_weather", "get_time"]
        assert [json.loads(calls[i]["arguments"]) for i in sorted(calls)] == [{"city": "Oslo"}, {"city": "Oslo"}]


async def test_sdk_non_streaming_and_errors(mini: Catalog) -> None:
    async with await start_sim(catalog=mini) as sim:
        client = AsyncOpenAI(base_url=sim.base_url, api_key="sk-any", max_retries=0)
        tool = mini.tests["t.tool"]
        resp = await client.chat.completions.create(model="oracle", messages=list(tool.messages), tools=[WEATHER])
        call = resp.choices[0].message.tool_calls[0]  # type: ignore[index]
        assert call.function.name == "get_weather"  # type: ignore[union-attr]
        assert json.loads(call.function.arguments) == {"city": "Paris", "unit": "c"}  # type: ignore[union-attr]
        assert resp.usage is not None and resp.system_fingerprint == "fp_bench_sim_1"
        models = [m.id async for m in client.models.list()]
        assert "oracle" in models and "flawed-no-call" in models
        with pytest.raises(NotFoundError):
            await client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "x"}])
        with pytest.raises(RateLimitError) as info:
            await client.chat.completions.create(model="oracle+429:3!", messages=[{"role": "user", "content": "x"}])
        assert info.value.response.headers["Retry-After"] == "3"
