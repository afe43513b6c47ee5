from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.upstream import Upstream, upstream_thread

# A project's own tests, as a user would write them: the openai SDK (sync, async, streamed, a tool call), raw
# httpx2 and aiohttp, none of them told about bench (the plugin sets OPENAI_BASE_URL) except the two raw clients,
# which take the fixture's URL. Each notes what it got in $NOTES: a replay is compared with the recording.
USER_TESTS = """
import asyncio, json, os

import aiohttp
import httpx2
import pytest
from openai import AsyncOpenAI, OpenAI

pytestmark = pytest.mark.bench
MSG = [{"role": "user", "content": os.environ.get("QUESTION", "hi")}]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


def note(name, value):
    with open(os.environ["NOTES"], "a") as f:
        f.write(json.dumps([name, value]) + "\\n")


def test_sync_repeated():
    client = OpenAI(max_retries=0)
    answers = [client.chat.completions.create(model="test-count", messages=MSG) for _ in range(3)]
    note("sync", [a.choices[0].message.content for a in answers])


def test_stream():
    client = OpenAI(max_retries=0)
    stream = client.chat.completions.create(model="test-model", messages=MSG, stream=True)
    note("stream", "".join(c.choices[0].delta.content or "" for c in stream if c.choices))


def test_tool_call():
    client = OpenAI(max_retries=0)
    stream = client.chat.completions.create(model="test-model", messages=MSG, tools=TOOLS, stream=True)
    args = "".join(
        c.choices[0].delta.tool_calls[0].function.arguments or ""
        for c in stream
        if c.choices and c.choices[0].delta.tool_calls
    )
    note("tool", json.loads(args))


def test_async_stream():
    async def main():
        client = AsyncOpenAI(max_retries=0)
        stream = await client.chat.completions.create(model="test-count", messages=MSG, stream=True)
        return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    note("async", asyncio.run(main()))


def test_httpx(bench_proxy):  # httpx2: the HTTP client the openai SDK is built on
    body = {"model": "test-model", "messages": MSG}
    r = httpx2.post(bench_proxy.url + "/chat/completions", json=body, headers={"Authorization": "Bearer sk-x"})
    note("httpx", [r.status_code, r.json()["choices"][0]["message"]["content"]])


def test_aiohttp(bench_proxy):
    async def main():
        async with aiohttp.ClientSession() as session:
            body = {"model": "test-model", "messages": MSG, "stream": True}
            async with session.post(bench_proxy.url + "/chat/completions", json=body) as r:
                return [r.status, (await r.read()).decode()]

    note("aiohttp", asyncio.run(main()))
"""


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    with upstream_thread() as up:
        yield up


@pytest.fixture(autouse=True)
def project_ini(pytester: pytest.Pytester) -> None:
    # The user's project sets the loop scope as pytest-asyncio asks, so its warning does not drown the runs' output.
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


@pytest.fixture
def notes(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = pytester.path / "notes.jsonl"
    monkeypatch.setenv("NOTES", str(path))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return path


def read_notes(path: Path) -> dict[str, Any]:
    found = {}
    for line in path.read_text().splitlines():
        name, value = json.loads(line)
        found[name] = value
    path.unlink()
    return found


def cassettes(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.cassette"))


def leftovers(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if ".partial" in p.name)
