"""The openai SDK, through `bench proxy`, against a real LLM server: record, then replay with the server gone."""

from __future__ import annotations

import asyncio
import itertools
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI, DefaultAsyncHttpxClient

from bench.cassette import read_cassette
from bench.parse import parse_exchange
from proxy import start_proxy
from tests.support.llm_server import free_port

pytestmark = pytest.mark.llm

WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def requests() -> list[dict[str, Any]]:
    return [
        {"messages": [{"role": "user", "content": "Name three colours."}], "max_tokens": 24},
        {
            "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
            "tools": [WEATHER_TOOL],
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            "max_tokens": 32,
        },
    ]


async def stream_bytes(client: AsyncOpenAI, req: dict[str, Any]) -> bytes:
    async with client.chat.completions.with_streaming_response.create(
        model="smollm2", stream=True, temperature=0, seed=7, stream_options={"include_usage": True}, **req
    ) as resp:
        return b"".join([part async for part in resp.iter_bytes()])


async def test_record_then_replay_the_same_bytes_with_the_server_stopped(smollm2: str, tmp_path: Path) -> None:
    upstream = smollm2.removesuffix("/v1")
    recorder = await start_proxy(upstream=upstream, cassettes=tmp_path, mode="record")
    try:
        client = AsyncOpenAI(base_url=f"{recorder.url}/v1", api_key="sk-e2e-secret-0123456789")
        recorded = [await stream_bytes(client, r) for r in requests()]
        plain = await client.chat.completions.create(model="smollm2", temperature=0, seed=7, **requests()[1])
        await client.close()
    finally:
        await recorder.close()
    assert recorded[1].count(b"get_weather") > 0
    assert plain.choices[0].message.tool_calls, "a forced tool_choice gives a real tool call"

    _header, exchanges = read_cassette(recorder.cassette_path or Path())
    assert len(exchanges) == 3 and all(x["outcome"] == "complete" for x in exchanges)
    parsed = parse_exchange(exchanges[1])
    assert parsed.tool_calls and parsed.tool_calls[0].name == "get_weather"
    assert b"sk-e2e-secret" not in (recorder.cassette_path or Path()).read_bytes()

    # Replay: a proxy with no upstream at all serves the recorded bytes.
    replayer = await start_proxy(upstream=None, cassettes=tmp_path, mode="replay", pace="instant")
    try:
        client = AsyncOpenAI(base_url=f"{replayer.url}/v1", api_key="sk-other")
        replayed = [await stream_bytes(client, r) for r in requests()]
        await client.close()
    finally:
        await replayer.close()
    assert replayed == recorded


async def test_recorded_timing_agrees_with_what_the_client_measured(smollm2: str, tmp_path: Path) -> None:
    """Catches mis-stamped reads (stamped on write, merged or split reads); the 1 ms figure itself is measured by
    benchmarks/timing_fidelity.py on a quiet machine, since a shared 2-core machine delays any process by ms."""
    # The proxy runs as users run it, in its own process, so that the client's event loop measures only itself.
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench",
            "proxy",
            "--upstream",
            smollm2.removesuffix("/v1"),
            "--port",
            str(port),
            "--cassettes",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client_ttft: list[float] = []
    client_gaps: list[list[float]] = []
    sent: list[float] = []

    async def on_request(request: Any) -> None:
        # The client's clock starts when the request goes on the wire, not while the SDK builds it.
        sent.append(time.perf_counter())

    try:
        await wait_for_port(port)
        http = DefaultAsyncHttpxClient(event_hooks={"request": [on_request]})
        client = AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="k", http_client=http)
        for i in range(8):
            stream = await client.chat.completions.create(
                model="smollm2",
                messages=[{"role": "user", "content": f"Count from {i} to {i + 20}."}],
                max_tokens=40,
                temperature=0,
                stream=True,
            )
            stamps = [time.perf_counter() async for chunk in stream if chunk.choices]
            client_ttft.append((stamps[0] - sent[-1]) * 1e6)
            client_gaps.append([(b - a) * 1e6 for a, b in itertools.pairwise(stamps)])
        await client.close()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    [cassette] = tmp_path.glob("*.cassette")
    _, exchanges = read_cassette(cassette)
    assert len(exchanges) == 8
    ttft_diffs = []
    gap_diffs: list[float] = []
    for record, ttft, gaps in zip(exchanges, client_ttft, client_gaps, strict=True):
        timing = parse_exchange(record).timing
        assert timing.ttft_us is not None
        ttft_diffs.append(abs(ttft - timing.ttft_us))
        assert len(timing.itl_us) == len(gaps), "the same events, counted alike"
        gap_diffs.extend(abs(c - r) for c, r in zip(gaps, timing.itl_us, strict=True))
    ttft_p50, itl_p50 = statistics.median(ttft_diffs), statistics.median(gap_diffs)
    print(f"TTFT |client - recorded| p50 {ttft_p50:.0f} us; ITL p50 {itl_p50:.0f} us")
    assert ttft_p50 < 25_000, ttft_diffs
    assert itl_p50 < 5_000


async def wait_for_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)
