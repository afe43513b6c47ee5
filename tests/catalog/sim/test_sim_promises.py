"""Promises of docs/sim.md that no other test held: `/v1/models` lists the documented models, the generic answer to a
request outside the catalog runs an agent loop to its end, and embeddings are a function of their input."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from openai import AsyncOpenAI

from bench.catalog.model import Catalog
from bench.catalog.sim import start_sim
from tests.catalog.conftest import TIME, WEATHER

DOC = Path(__file__).resolve().parents[3] / "docs" / "sim.md"


def documented_models() -> list[str]:
    section = DOC.read_text().split("## Models", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([\w-]+)` \|", section, re.M)


async def test_models_lists_every_documented_model(mini: Catalog) -> None:
    async with await start_sim(catalog=mini) as sim:
        client = AsyncOpenAI(base_url=sim.base_url, api_key="sk-any", max_retries=0)
        listed = sorted([m.id async for m in client.models.list()])
        await client.close()
    assert len(documented_models()) == 10 and listed == sorted(documented_models())


async def test_a_request_outside_the_catalog_calls_each_tool_once_in_order_then_says_done(mini: Catalog) -> None:
    messages: list[Any] = [{"role": "user", "content": "Something no catalog test asks."}]
    called = []
    async with await start_sim(catalog=mini) as sim:
        client = AsyncOpenAI(base_url=sim.base_url, api_key="sk-any", max_retries=0)
        for turn in range(3):
            reply = await client.chat.completions.create(model="oracle", messages=messages, tools=[WEATHER, TIME])
            message = reply.choices[0].message
            if not message.tool_calls:
                break
            [call] = message.tool_calls  # one call per turn
            called.append(call.function.name)
            json.loads(call.function.arguments)  # example arguments, valid JSON
            messages.append(message.model_dump(exclude_none=True))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": f"result {turn}"})
        plain = await client.chat.completions.create(model="oracle", messages=[{"role": "user", "content": "Hi?"}])
        await client.close()
    assert called == ["get_weather", "get_time"]
    assert message.content == "Done: result 0; result 1"
    assert plain.choices[0].message.content and not plain.choices[0].message.tool_calls  # without tools: text


async def test_embeddings_are_eight_numbers_derived_from_the_input(mini: Catalog) -> None:
    async with await start_sim(catalog=mini) as sim:
        client = AsyncOpenAI(base_url=sim.base_url, api_key="sk-any", max_retries=0)
        first = await client.embeddings.create(model="oracle", input=["same text", "other text"])
        again = await client.embeddings.create(model="oracle", input="same text")
        tokens = await client.embeddings.create(model="oracle", input=[[1, 2, 3]])
        await client.close()
    assert [len(d.embedding) for d in [*first.data, *again.data, *tokens.data]] == [8, 8, 8, 8]
    assert again.data[0].embedding == first.data[0].embedding != first.data[1].embedding
    assert first.usage.prompt_tokens > 0
