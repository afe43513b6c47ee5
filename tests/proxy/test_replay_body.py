"""Replaying a large answer written in parts (bench.proxy.replay_body): the index holds it without its parts, the parts
are read from the cassette as they are served, byte for byte and never ahead of the recorded pace, and a part that
cannot be read back cuts the answer and says why instead of serving something else."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from pathlib import Path

import aiohttp
from aiohttp import web

from bench.core.cassette import CassetteReader
from bench.proxy import start_proxy
from tests.proxy.test_parts import kinds, serve, sse_events

SPILL = 64 << 10


def paced_app(body: list[bytes]) -> web.Application:
    async def chat(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i, event in enumerate(body):
            await resp.write(event)
            if i % 100 == 0:
                await asyncio.sleep(0.002)  # gaps the replay must keep
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


async def fetch(url: str) -> bytes:
    request = {"model": "big-model", "messages": [{"role": "user", "content": "long"}], "stream": True}
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session,
        session.post(f"{url}/v1/chat/completions", json=request) as resp,
    ):
        assert resp.status == 200
        return await resp.read()


async def record(tmp_path: Path, body: list[bytes]) -> Path:
    async for url in serve(paced_app(body)):
        recorder = await start_proxy(upstream=url, cassettes=tmp_path / "rec")
        assert recorder.recording.sink is not None
        recorder.recording.sink.spill_bytes = SPILL
        assert await fetch(recorder.url) == b"".join(body)
        await recorder.close()
    path = recorder.cassette_path
    assert path is not None and kinds(path).count("part") >= 2
    return path


async def test_a_large_answer_replays_from_its_parts_byte_for_byte_at_the_recorded_pace(tmp_path: Path) -> None:
    body = sse_events(12000)  # 1.9 MB: many parts, however the reads happen to be cut
    path = await record(tmp_path, body)
    [recorded] = list(CassetteReader(path))
    player = await start_proxy(upstream=None, cassettes=tmp_path / "rec", mode="replay", pace="realtime")
    try:
        assert player.index is not None and player.recording.sink is not None
        player.recording.sink.spill_bytes = SPILL
        [item] = player.index.all
        held = item.record.response
        # The index holds the record without its parts' reads: the body is read from the file when served.
        assert held.parts and sum(map(len, held.chunks)) < len(b"".join(body)) // 4
        assert await fetch(player.url) == b"".join(body)
        # A second replay reads the parts again (nothing was kept from the first).
        assert hashlib.sha256(await fetch(player.url)).digest() == hashlib.sha256(b"".join(body)).digest()
        log = player.cassette_path
        await player.close()
    finally:
        await player.close()
    assert log is not None and kinds(log).count("part") >= 2  # the replay's own record was written in parts too
    reader = CassetteReader(log)
    replays = list(reader)
    assert reader.problem is None and len(replays) == 2
    for replay in replays:
        assert replay.outcome == "complete" and replay.replay_of is not None
        assert replay.response.chunks == recorded.response.chunks  # read for read
        # Never ahead of the recording: each read goes out no earlier than it arrived when recorded.
        got, want = 0, 0
        for mine, theirs in zip(replay.response.chunk_us, recorded.response.chunk_us, strict=True):
            got, want = got + mine, want + theirs
            assert got >= want - 1  # whole microseconds on both sides


async def test_a_part_damaged_after_the_replay_started_cuts_the_answer_and_says_why(tmp_path: Path) -> None:
    body = sse_events(12000)
    path = await record(tmp_path, body)
    player = await start_proxy(upstream=None, cassettes=tmp_path / "rec", mode="replay", pace="instant")
    try:
        # Damage the middle of the file in place (same inode and size): the parts there no longer pass their
        # checksums. An eighth of the file, so that a whole frame is hit in many stripes: a frame damaged within one
        # stripe is rebuilt by its repair frame and served whole (64 bytes did that when they fell in one stripe).
        data = bytearray(path.read_bytes())
        for i in range(len(data) // 3, len(data) // 3 + len(data) // 8):
            data[i] ^= 0x55
        with path.open("r+b") as fh:
            fh.write(bytes(data))
        got = b""
        with contextlib.suppress(aiohttp.ClientPayloadError):
            got = await fetch(player.url)
        whole = b"".join(body)
        assert got != whole and whole.startswith(got)  # cut, never served whole or with other bytes in it
        log = player.cassette_path
    finally:
        await player.close()
    assert log is not None
    [replay] = list(CassetteReader(log))
    assert replay.outcome == "truncated" and replay.response.cut  # a stream cut before its end, as when recorded
    assert replay.error is not None and "could not be read back" in replay.error and str(path.name) in replay.error
