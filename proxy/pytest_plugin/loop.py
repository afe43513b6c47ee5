"""One event loop thread per pytest process, listening on one loopback address for the whole run.

The proxy runs in its own thread because the code under test may block the main thread (the sync openai SDK) or run
its own event loop (async tests). It keeps one address for the run, so clients built once (at import time, in a
session fixture) stay valid: each request goes to the proxy of the test running at that moment.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from aiohttp import web

from bench.core.serving import listen
from bench.proxy.app import ClientLimits, serve_with
from bench.proxy.error_responses import error_response
from bench.proxy.state import ProxyStats

if TYPE_CHECKING:
    from bench.proxy.server import RunningProxy

T = TypeVar("T")
# Starting or stopping a test's proxy takes milliseconds; this bounds a wedged loop, not a slow machine.
CALL_TIMEOUT = 120.0


class Route:
    """What answers requests during one test: its proxy, or (no cassette to replay) a miss explaining why."""

    def __init__(self, proxy: RunningProxy | None, missing: str | None = None) -> None:
        self.proxy = proxy
        self.missing = missing
        self.missing_hits = 0


class ProxyLoop:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.route: Route | None = None
        self.url = ""
        self._runner: web.BaseRunner | None = None
        self._limits = ClientLimits()
        self._thread = threading.Thread(target=self._run, name="bench-pytest-proxy", daemon=True)
        self._thread.start()
        self.call(self._listen())

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the proxy's loop and wait for its result from this (any other) thread."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(CALL_TIMEOUT)

    async def _listen(self) -> None:
        self._runner, _, self.url = await listen(serve_with(self._dispatch, self._limits, ProxyStats()), "127.0.0.1", 0)

    async def _dispatch(self, request: web.BaseRequest) -> web.StreamResponse:
        route = self.route
        if route is not None and route.proxy is not None:
            return await route.proxy.handle(request)
        if route is not None and route.missing is not None:
            route.missing_hits += 1
            return error_response(404, route.missing, type="invalid_request_error", code="replay_miss")
        return error_response(
            503,
            f"bench: {request.method} {request.path} arrived while no test using bench was running; "
            "send it from a test marked bench (or using the bench_proxy fixture)",
            type="server_error",
            code="no_bench_test",
        )

    def close(self) -> None:
        if self._runner is not None:
            self.call(self._runner.cleanup())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10.0)
        if not self._thread.is_alive():
            self.loop.close()
