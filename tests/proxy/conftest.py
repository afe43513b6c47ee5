from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI

from tests.support.upstream import Upstream, start_upstream

SECRET = "sk-client-secret-0123456789"
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather forecast for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]
# What the SDK's HTTP client says when a body is cut off (as it does when the upstream itself cuts it, direct).
CUT = r"incomplete|peer closed"
MESSAGES: list[Any] = [{"role": "user", "content": "Say something."}]


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    up = await start_upstream()
    yield up
    await up.close()


@pytest.fixture
def cassettes(tmp_path: Path) -> Path:
    return tmp_path / "cassettes"


def sdk(base_url: str, api_key: str = SECRET) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=20)


async def raw_chat(client: AsyncOpenAI, **kwargs: Any) -> bytes:
    """The exact body bytes the SDK receives for a chat completion (streamed or not)."""
    extra = {k: kwargs.pop(k) for k in [k for k in kwargs if k.startswith("x_")]}
    if extra:
        kwargs["extra_body"] = extra
    kwargs.setdefault("model", "test-model")
    kwargs.setdefault("messages", MESSAGES)
    async with client.chat.completions.with_streaming_response.create(**kwargs) as resp:
        return b"".join([chunk async for chunk in resp.iter_bytes()])


async def sdk_session(client: AsyncOpenAI) -> dict[str, bytes]:
    """A mix of everything a client does, as raw bytes keyed by a name: the yardstick for record and replay."""
    out: dict[str, bytes] = {}
    out["chat"] = await raw_chat(client)
    out["chat_stream"] = await raw_chat(client, stream=True, stream_options={"include_usage": True})
    out["tools"] = await raw_chat(client, tools=TOOLS)
    out["tools_stream"] = await raw_chat(client, tools=TOOLS, stream=True)
    async with client.embeddings.with_streaming_response.create(model="test-embed", input=["a", "b"]) as resp:
        out["embeddings"] = await resp.read()
    async with client.models.with_streaming_response.list() as resp:
        out["models"] = await resp.read()
    return out
