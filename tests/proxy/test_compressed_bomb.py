"""A hostile upstream that answers with a decompression bomb (1 MiB of gzip that decodes to 1 GiB): the client gets
the exact bytes, the exchange is recorded and marked, and the proxy decodes no more than `MAX_DECODED` of it, so one
such answer cannot exhaust its memory (figures: benchmarks/record_memory.py --bomb; docs/proxy.md)."""

from __future__ import annotations

import gzip
import hashlib
import tracemalloc
from pathlib import Path

import aiohttp
from aiohttp import web

from bench.core.cassette import read_cassette
from bench.core.decoding import MAX_DECODED, decoded_record_reads
from bench.proxy import start_proxy
from tests.support.serve import serve_on_loopback

KEY = "sk-bomb-test-0123456789abcdef"


async def test_a_gzip_bomb_is_forwarded_exactly_recorded_marked_and_decoded_only_up_to_the_limit(
    tmp_path: Path,
) -> None:
    bomb = gzip.compress(b"\0" * (1 << 30), compresslevel=9)
    assert len(bomb) < 2 << 20

    async def chat(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=bomb, content_type="application/json", headers={"Content-Encoding": "gzip"})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner, url = await serve_on_loopback(app)
    try:
        proxy = await start_proxy(upstream=url, cassettes=tmp_path)
        tracemalloc.start()
        try:
            async with (
                aiohttp.ClientSession(auto_decompress=False) as session,
                session.post(
                    f"{proxy.url}/v1/chat/completions",
                    json={"model": "m", "messages": []},
                    headers={"Authorization": f"Bearer {KEY}"},
                ) as resp,
            ):
                got = await resp.read()
            await proxy.close()  # every record built and written
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    finally:
        await runner.cleanup()
    assert hashlib.sha256(got).digest() == hashlib.sha256(bomb).digest()  # the client gets the upstream's bytes
    # The proxy decodes the body when it builds the record, and again to search it for the key: each time no more
    # than the limit (with 256 MiB, the limit before, this peaked past 500 MiB;
    # at 64 MiB about 3 x 64).
    assert peak < 256 << 20, f"{peak >> 20} MiB"
    assert proxy.cassette_path is not None
    _, [record] = read_cassette(proxy.cassette_path)
    assert record.response.status == 200
    # Marked: the record says the body was cut at the limit, and what it keeps decodes to the limit's worth of it.
    assert any("decodes past the limit" in note for note in record.redacted), record.redacted
    decoded = decoded_record_reads(record.response.headers, record.response.chunks)
    assert decoded.body == b"\0" * len(decoded.body) and 0 < len(decoded.body) <= MAX_DECODED
