"""Starting an aiohttp server on a host and port, shared by the proxy and the simulator.

Lives in the core for both of them; the scorer never imports it (it is the one core module that imports aiohttp).
"""

from __future__ import annotations

from aiohttp import web

from bench.core.errors import BenchError

# aiohttp's default backlog of 128 overflows when hundreds of clients connect at once (docs/proxy.md, "Measured facts").
LISTEN_BACKLOG = 2048


async def listen(app: web.Application | web.Server, host: str, port: int) -> tuple[web.BaseRunner, web.TCPSite, str]:
    """Serve `app` (an application, or a low-level server as the proxy runs); returns the runner, the site and the
    base URL with the port actually bound (port 0: any)."""
    runner: web.BaseRunner
    if isinstance(app, web.Application):
        runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=1.0)
    else:
        runner = web.ServerRunner(app, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=LISTEN_BACKLOG)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise BenchError(f"cannot listen on {host}:{port}: {exc.strerror}; choose another --port or --host") from None
    bound = runner.addresses[0]
    return runner, site, f"http://{host if ':' not in host else f'[{host}]'}:{bound[1]}"
