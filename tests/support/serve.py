"""An aiohttp app served on a free port of the loopback interface, for tests' and benchmarks' stand-in upstreams."""

from __future__ import annotations

from aiohttp import web


async def serve_on_loopback(app: web.Application) -> tuple[web.AppRunner, str]:
    """Start `app` on 127.0.0.1: its runner (clean it up to stop it) and its URL."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"
