"""The openai SDK, through `bench proxy`, against a real LLM server: record, then replay with the server gone."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI

from bench.core.cassette import read_cassette
from bench.core.parse import parse_exchange
from bench.proxy import start_proxy
from tests.support.fidelity import measure_fidelity

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
    assert len(exchanges) == 3 and all(x.outcome == "complete" for x in exchanges)
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
    """Catches mis-stamped reads: merged or split reads (events counted differently), reads stamped later than the
    client got them or a t0 taken before the client sent the request (a recorded TTFT longer than the client's, which
    causality forbids: the proxy reads the request after the client wrote it and each event before the client reads
    it), and gaps between events off by a token's time (~7 ms). How close the two TTFTs are is a figure, not a bound:
    it includes how soon the machine schedules the proxy, which a loaded machine delays by tens of ms, so it is
    measured by benchmarks/timing_fidelity.py on a quiet machine (docs/proxy.md)."""
    result = await measure_fidelity(smollm2.removesuffix("/v1"), tmp_path, requests=8, max_tokens=40)
    assert result.recorded == 8
    for name, level in (("wire", result.wire), ("bytes", result.bytes), ("sdk", result.sdk)):
        assert level.mismatched == 0, f"{name}: the same events, counted alike, each with a first token"
        ttft_p50 = statistics.median(abs(d) for d in level.ttft_diff_us)
        itl_p50 = statistics.median(abs(d) for d in level.itl_diff_us)
        print(f"{name}: TTFT |client - recorded| p50 {ttft_p50:.0f} us; ITL p50 {itl_p50:.0f} us")
        # Recorded offsets are whole microseconds, rounded down: a few us of slack, no more.
        assert min(level.ttft_diff_us) > -10, f"{name}: a recorded TTFT longer than the client's: {level.ttft_diff_us}"
    # At the socket the client measures what the proxy measures on its side; the client's HTTP stack and the
    # SDK's decoding are not the proxy's to bound. A read stamped a token late or early is off by a whole gap; the
    # bound is half the recorded gap, which a loaded machine stretches with the diffs (a fixed 2 ms failed at load 8).
    itl_p50 = statistics.median(result.wire.itl_us)
    assert statistics.median(abs(d) for d in result.wire.itl_diff_us) < itl_p50 / 2, itl_p50
