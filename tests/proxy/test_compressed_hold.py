"""A compressed answer is held whole while it is recorded (it is searched for secrets decoded, as one stream), so
past `COMPRESSED_HOLD` the proxy stops holding it: its client still gets every byte, and its record keeps the first
part, marked `truncated` and cut, with the fix in its error (docs/proxy.md, "Large answers")."""

from __future__ import annotations

import gzip
import hashlib
import os
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from bench.core.cassette import read_cassette
from bench.proxy import parts, start_proxy
from tests.support.serve import serve_on_loopback

HOLD = 256 << 10


async def test_a_compressed_answer_past_the_hold_is_forwarded_whole_and_recorded_up_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parts, "COMPRESSED_HOLD", HOLD)
    body = gzip.compress(os.urandom(2 << 20), compresslevel=1)  # incompressible: 2 MiB on the wire

    async def chat(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})
        await response.prepare(request)
        for at in range(0, len(body), 32 << 10):
            await response.write(body[at : at + (32 << 10)])
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner, url = await serve_on_loopback(app)
    try:
        proxy = await start_proxy(upstream=url, cassettes=tmp_path)
        async with (
            aiohttp.ClientSession(auto_decompress=False) as session,
            session.post(f"{proxy.url}/v1/chat/completions", json={"model": "m", "messages": []}) as resp,
        ):
            got = await resp.read()
        await proxy.close()
    finally:
        await runner.cleanup()
    assert hashlib.sha256(got).digest() == hashlib.sha256(body).digest()
    assert proxy.cassette_path is not None
    _, [record] = read_cassette(proxy.cassette_path)
    kept = b"".join(record.response.chunks)
    assert HOLD <= len(kept) < HOLD + (1 << 20) and body.startswith(kept)
    assert record.outcome == "truncated" and record.response.cut
    assert len(record.response.chunk_us) == len(record.response.chunks)
    assert record.error is not None and "Accept-Encoding: identity" in record.error and str(len(kept)) in record.error
