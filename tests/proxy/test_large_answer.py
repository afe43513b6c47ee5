"""A 50 MB non-streamed answer through a real `bench proxy`: recorded byte for byte and replayed byte for byte."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import aiohttp
from aiohttp import web

from bench.core.cassette import read_cassette
from bench.proxy import start_proxy
from tests.support.serve import serve_on_loopback

SIZE = 50 << 20


def answer() -> bytes:
    # Text of random words, as a model writes it (random bytes would make closing the cassette, which recompresses it,
    # the slowest part of the test).
    rng = random.Random(50)
    words = b"the quick brown fox jumps over a lazy dog while seven wise owls count stars".split(b" ")
    text = b" ".join(rng.choices(words, k=SIZE // 5))
    head = b'{"id":"c1","object":"chat.completion","model":"big-model","choices":[{"message":{"content":"'
    return head + text + b'"}}],"system_fingerprint":"fp_big"}'


async def test_a_50_mb_answer_is_recorded_and_replayed_byte_for_byte(tmp_path: Path) -> None:
    body = answer()
    want = hashlib.sha256(body).hexdigest()

    async def chat(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner, url = await serve_on_loopback(app)
    cassettes = tmp_path / "cassettes"
    request = {"model": "big-model", "messages": [{"role": "user", "content": "a long answer"}]}
    timeout = aiohttp.ClientTimeout(total=300)
    try:
        recorder = await start_proxy(upstream=url, cassettes=cassettes)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(f"{recorder.url}/v1/chat/completions", json=request) as resp,
        ):
            assert resp.status == 200 and hashlib.sha256(await resp.read()).hexdigest() == want
        await recorder.close()
    finally:
        await runner.cleanup()  # the upstream is gone: the replay below can only serve the recording

    assert recorder.cassette_path is not None
    _, [record] = read_cassette(recorder.cassette_path)
    assert record.outcome == "complete" and record.response.raw_bytes == len(body)
    assert hashlib.sha256(b"".join(record.response.chunks)).hexdigest() == want
    assert len(record.response.chunk_us) == len(record.response.chunks) > 1
    # Identified from the body's edges, never parsed or copied whole.
    assert (record.upstream.model, record.upstream.system_fingerprint) == ("big-model", "fp_big")

    player = await start_proxy(upstream=None, cassettes=cassettes, mode="replay", pace="instant")
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(f"{player.url}/v1/chat/completions", json=request) as resp,
        ):
            assert resp.status == 200 and hashlib.sha256(await resp.read()).hexdigest() == want
    finally:
        await player.close()
    assert player.stats.replayed == 1 and player.stats.misses == 0
