"""A small application that uses an LLM through the openai SDK, as a project would, with no knowledge of bench.

The SDK reads OPENAI_BASE_URL and OPENAI_API_KEY from the environment: in production they name the real server; under
bench's pytest plugin they name bench's proxy, which records or replays.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

from openai import AsyncOpenAI, OpenAI

MODEL = os.environ.get("CHAT_APP_MODEL", "smollm2")
WEATHER_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather forecast for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "the city's name"}},
            "required": ["city"],
        },
    },
}


def summarize(text: str) -> str:
    """One sentence about `text` (a plain, non-streamed chat completion)."""
    reply = OpenAI().chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": f"Summarize in one sentence: {text}"}],
        max_tokens=40,
        temperature=0,
    )
    return reply.choices[0].message.content or ""


def stream_story(topic: str) -> Iterator[str]:
    """A very short story about `topic`, piece by piece as the model writes it."""
    stream = OpenAI().chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": f"Tell a two-sentence story about {topic}."}],
        max_tokens=48,
        temperature=0,
        stream=True,
    )
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            yield chunk.choices[0].delta.content


async def answer(question: str) -> str:
    """An answer from the async client, streamed and joined."""
    client = AsyncOpenAI()
    stream = await client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": question}],
        max_tokens=32,
        temperature=0,
        stream=True,
    )
    parts = [c.choices[0].delta.content or "" async for c in stream if c.choices]
    return "".join(parts)


def weather_request(city: str) -> tuple[str, dict[str, Any]]:
    """The tool call the model makes when asked about the weather: the function's name and its arguments."""
    reply = OpenAI().chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": f"What is the weather in {city}?"}],
        tools=[WEATHER_TOOL],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        max_tokens=64,
        temperature=0,
    )
    call = (reply.choices[0].message.tool_calls or [])[0]
    function = call.function  # type: ignore[union-attr]
    return function.name, json.loads(function.arguments)
