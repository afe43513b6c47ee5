"""Compression as gateways do it, for tests: an encoder flushed after every write, and a gateway that compresses.

`Encoder` compresses with the stdlib's zlib or the brotli library, flushing after every piece so that a streamed
event reaches the client when it is written (as a gateway compressing SSE must). `start_compressing_gateway` puts a
real aiohttp server in front of an upstream that answers every request through it with `Content-Encoding: CODING`,
one compressed write per upstream read.
"""

from __future__ import annotations

import zlib

import aiohttp
import brotli
from aiohttp import web

CODINGS = ("gzip", "deflate", "br")
_SKIP = frozenset({"content-length", "content-encoding", "transfer-encoding", "connection", "keep-alive", "host"})


class Encoder:
    def __init__(self, coding: str) -> None:
        self.coding = coding
        if coding == "br":
            self.br = brotli.Compressor()
        else:
            self.z = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS | 16 if coding == "gzip" else zlib.MAX_WBITS)

    def piece(self, data: bytes) -> bytes:
        if self.coding == "br":
            return bytes(self.br.process(data)) + bytes(self.br.flush())
        return self.z.compress(data) + self.z.flush(zlib.Z_SYNC_FLUSH)

    def end(self) -> bytes:
        return bytes(self.br.finish()) if self.coding == "br" else self.z.flush(zlib.Z_FINISH)


async def start_compressing_gateway(upstream: str, coding: str) -> tuple[web.AppRunner, str]:
    session = aiohttp.ClientSession(auto_decompress=False)

    async def handle(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _SKIP}
        async with session.request(request.method, upstream + request.path_qs, headers=headers, data=body) as up:
            out = {k: v for k, v in up.headers.items() if k.lower() not in _SKIP}
            response = web.StreamResponse(status=up.status, headers={**out, "Content-Encoding": coding})
            await response.prepare(request)
            enc = Encoder(coding)
            async for data in up.content.iter_any():
                await response.write(enc.piece(data))
            await response.write(enc.end())
            await response.write_eof()
            return response

    async def close_session(app: web.Application) -> None:
        await session.close()

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    app.on_cleanup.append(close_session)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"
