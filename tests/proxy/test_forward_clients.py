"""Real clients through the proxy: the synchronous openai SDK, which closes its connection right after `[DONE]`."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import aiohttp
import pytest
from openai import OpenAI

from bench.core.cassette import CassetteReader
from bench.proxy import forward, start_proxy
from tests.proxy.conftest import MESSAGES, SECRET
from tests.support.upstream import Upstream

THREADS = 4
PER_THREAD = 50


def _sync_streams(base_url: str, worker: int) -> list[str]:
    """PER_THREAD streamed chats with the synchronous SDK, read to their end; returns each answer's text."""
    client = OpenAI(base_url=base_url, api_key=SECRET, max_retries=0, timeout=20)
    texts = []
    try:
        for i in range(PER_THREAD):
            # Every third upstream pauses between `[DONE]` and its end of body: the client has closed by then.
            extra = {"x_ttft_ms": 0, "x_delay_ms": 0, "x_words": 3 + i % 5, "x_end_delay_ms": 40 if i % 3 == 0 else 0}
            stream = client.chat.completions.create(
                model="test-model",
                messages=[*MESSAGES, {"role": "user", "content": f"{worker}-{i}"}],
                stream=True,
                extra_body=extra,
            )
            texts.append("".join(c.choices[0].delta.content or "" for c in stream if c.choices))
    finally:
        client.close()
    return texts


async def test_sync_sdk_streams_are_complete_recorded_and_replayed_with_no_traceback(
    upstream: Upstream, cassettes: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    results = await asyncio.gather(*(asyncio.to_thread(_sync_streams, proxy.url + "/v1", w) for w in range(THREADS)))
    await proxy.close()
    assert proxy.cassette_path is not None
    reader = CassetteReader(proxy.cassette_path)
    records = list(reader)
    end = reader.end
    assert end is not None
    assert sum(len(texts) for texts in results) == len(records) == THREADS * PER_THREAD
    assert all(text for texts in results for text in texts)
    assert {r.outcome for r in records} == {"complete"}, [(r.outcome, r.error) for r in records if r.error]
    assert proxy.stats.client_disconnects == 0 and end.client_disconnects == 0

    # Replayed to the same client: the same answers, every one complete again.
    player = await start_proxy(upstream=None, cassettes=cassettes, mode="replay", pace="instant")
    assert await asyncio.to_thread(_sync_streams, player.url + "/v1", 0) == results[0]
    await player.close()
    assert player.cassette_path is not None
    replayed = list(CassetteReader(player.cassette_path))
    assert len(replayed) == PER_THREAD and {r.outcome for r in replayed} == {"complete"}
    assert player.stats.client_disconnects == 0
    # The proxy's and its aiohttp server's log (not the garbage collector's words about earlier tests).
    problems = [r for r in caplog.records if r.name.startswith(("bench", "aiohttp")) and r.levelno >= logging.WARNING]
    assert not problems, [r.getMessage() for r in problems]


async def test_sync_sdk_stream_is_complete_when_the_upstreams_end_comes_after_the_grace(
    upstream: Upstream, cassettes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The client closes at `[DONE]`; the upstream's end of body comes 10x the grace later. This is how a loop stalled
    # past the grace (a loaded machine, a long garbage collection) looks to the proxy: the client still had it all.
    monkeypatch.setattr(forward, "END_GRACE", 0.05)
    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes)

    def three_streams() -> list[str]:
        with OpenAI(base_url=proxy.url + "/v1", api_key=SECRET, max_retries=0, timeout=20) as client:
            texts = []
            for i in range(3):
                extra = {"x_ttft_ms": 0, "x_delay_ms": 0, "x_words": 4, "x_end_delay_ms": 500}
                stream = client.chat.completions.create(
                    model="test-model",
                    messages=[*MESSAGES, {"role": "user", "content": str(i)}],
                    stream=True,
                    extra_body=extra,
                )
                texts.append("".join(c.choices[0].delta.content or "" for c in stream if c.choices))
            return texts

    texts = await asyncio.to_thread(three_streams)
    await proxy.close()
    assert proxy.cassette_path is not None
    reader = CassetteReader(proxy.cassette_path)
    records = list(reader)
    assert len(records) == 3 and all(texts)
    assert [(r.outcome, r.error) for r in records] == [("complete", None)] * 3
    assert all(r.response.chunks[-1].endswith(b"data: [DONE]\n\n") for r in records)
    assert proxy.stats.client_disconnects == 0 and reader.end is not None and reader.end.client_disconnects == 0


async def test_sync_sdk_leaving_mid_stream_is_client_disconnected(
    upstream: Upstream, cassettes: Path, caplog: pytest.LogCaptureFixture
) -> None:
    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes)

    def leave_after_two_chunks() -> None:
        with OpenAI(base_url=proxy.url + "/v1", api_key=SECRET, max_retries=0, timeout=20) as client:
            extra = {"x_ttft_ms": 0, "x_delay_ms": 100, "x_words": 30}
            stream = client.chat.completions.create(
                model="test-model", messages=MESSAGES, stream=True, extra_body=extra
            )
            for n, _ in enumerate(stream):
                if n == 1:
                    break
            stream.close()

    await asyncio.to_thread(leave_after_two_chunks)
    for _ in range(200):
        if upstream.requests[-1].disconnected and proxy.in_flight == 0:
            break
        await asyncio.sleep(0.05)
    await proxy.close()
    assert proxy.cassette_path is not None
    reader = CassetteReader(proxy.cassette_path)
    records = list(reader)
    end = reader.end
    assert end is not None
    assert [r.outcome for r in records] == ["client_disconnected"]
    assert proxy.stats.client_disconnects == 1 and end.client_disconnects == 1
    assert upstream.requests[-1].disconnected
    assert not [r for r in caplog.records if r.name.startswith(("bench", "aiohttp")) and r.levelno >= logging.WARNING]


async def test_a_client_leaving_after_done_while_the_proxy_stops_had_the_whole_answer(
    upstream: Upstream, cassettes: Path
) -> None:
    # The order the suite met once in ten runs: the client reads `[DONE]`, the proxy's stop begins, and only then
    # does the client's connection close. Its answer was whole; the stop's grace is for exchanges still running.
    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    body = {"model": "test-model", "messages": MESSAGES, "stream": True, "x_words": 4, "x_end_delay_ms": 300}
    async with aiohttp.ClientSession() as session:
        response = await session.post(
            proxy.url + "/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {SECRET}"}
        )
        seen = b""
        while b"data: [DONE]\n\n" not in seen:
            seen += await response.content.readany()
        stopping = asyncio.create_task(proxy.close())
        while not proxy.closing:
            await asyncio.sleep(0)
        response.connection.transport.close()  # type: ignore[union-attr]
        response.release()
        await stopping
    assert proxy.cassette_path is not None
    reader = CassetteReader(proxy.cassette_path)
    records = list(reader)
    assert [(r.outcome, r.error) for r in records] == [("complete", None)]
    assert b"".join(records[0].response.chunks) == seen
    assert proxy.stats.client_disconnects == 0 and reader.end is not None and reader.end.client_disconnects == 0
