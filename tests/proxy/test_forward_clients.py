"""Real clients through the proxy: the synchronous openai SDK, which closes its connection right after `[DONE]`."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from openai import OpenAI

from bench.cassette import CassetteReader
from proxy import start_proxy
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
