"""The proxy's aiohttp server: one handler for every path, that authenticates, then replays, forwards or answers a miss.

A low-level `web.Server`, not a `web.Application`: with one route and no middleware the proxy needs no router, and
owning the connection's protocol lets it time each request from the socket read that completed the request's head.
aiohttp parses that read, wakes the connection's task, builds the request and starts the handler in a new task, which
took 0.2 ms on a 2-core machine: time the client has already waited, so it belongs inside the recorded times.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from functools import partial
from time import monotonic_ns

from aiohttp import HttpVersion11, web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http_parser import RawRequestMessage
from aiohttp.streams import StreamReader

from bench.cassette.format import CLIENT_DISCONNECTED, UPSTREAM_ERROR
from bench.fingerprint import fingerprint
from proxy.errors import error_response, shutting_down, unauthorized
from proxy.forward import TAG_PREFIX, forward, serve_recorded
from proxy.recorder import Exchange
from proxy.replay import describe_miss
from proxy.state import ProxyState

# Request bodies are read whole (they are fingerprinted and recorded); chat requests with images can be large.
MAX_REQUEST_BODY = 256 << 20


def _authorized(request: web.BaseRequest, token: str) -> bool:
    presented = request.headers.get("Authorization", "")
    scheme, _, value = presented.partition(" ")
    if scheme.lower() != "bearer":
        value = request.headers.get("api-key", "")
    return hmac.compare_digest(value.strip().encode(), token.encode())


class ArrivalStamps(web.RequestHandler):
    """An HTTP connection that notes when each read reached it, before aiohttp parses the bytes."""

    __slots__ = ("last_read", "request_arrived")

    def __init__(self, server: web.Server) -> None:
        # No access log (a line per request costs more than forwarding it); None is how aiohttp's runners say so.
        super().__init__(server, loop=asyncio.get_running_loop(), access_log=None)  # type: ignore[arg-type]
        self.last_read = 0
        self.request_arrived = 0

    def data_received(self, data: bytes) -> None:
        self.last_read = monotonic_ns()
        super().data_received(data)


class ProxyServer(web.Server):
    """aiohttp's low-level server with `ArrivalStamps` connections."""

    def __call__(self) -> ArrivalStamps:
        return ArrivalStamps(self)


def _make_request(
    message: RawRequestMessage,
    payload: StreamReader,
    protocol: web.RequestHandler,
    writer: AbstractStreamWriter,
    task: asyncio.Task[None],
) -> web.BaseRequest:
    # aiohttp calls this as soon as the connection's task wakes for a parsed head: before it handles any later read
    # (the body, say), so the last read is the one that completed this head. A request that queued behind another
    # on its connection (pipelining) is timed from a later read, never later than its handler's start.
    if isinstance(protocol, ArrivalStamps):
        protocol.request_arrived = protocol.last_read
    loop = asyncio.get_running_loop()
    return web.BaseRequest(message, payload, protocol, writer, task, loop, client_max_size=MAX_REQUEST_BODY)


def _arrival(request: web.BaseRequest) -> int:
    protocol = request.protocol
    return protocol.request_arrived if isinstance(protocol, ArrivalStamps) else monotonic_ns()


async def _answer_expect(request: web.BaseRequest) -> web.Response | None:
    """`Expect: 100-continue` (curl sends it for bodies over 1 KiB): tell the client to send its body now, or it
    waits a second before it does. A bare server leaves this to its handler."""
    expect = request.headers.get("Expect")
    if expect is None or request.version != HttpVersion11:
        return None
    if expect.strip().lower() != "100-continue":
        return error_response(417, f"cannot meet Expect: {expect}", type="invalid_request_error", code="bad_expect")
    await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    return None


async def handle(state: ProxyState, request: web.BaseRequest) -> web.StreamResponse:
    t0 = _arrival(request)
    started_us = time.time_ns() // 1000 - (monotonic_ns() - t0) // 1000
    if state.closing:
        return shutting_down()
    if state.client_token is not None and not _authorized(request, state.client_token):
        state.stats.rejected += 1
        return unauthorized()
    refused = await _answer_expect(request)
    if refused is not None:
        return refused
    body = await request.read()
    path, _, query = request.raw_path.partition("?")
    headers = [[k, v] for k, v in request.headers.items()]
    tags = {k[len(TAG_PREFIX) :].lower(): v for k, v in headers if k.lower().startswith(TAG_PREFIX)}
    # Replay needs the fingerprint now; recording computes it after the response; passthrough never.
    fp = fingerprint(request.method, path, query, body) if state.index is not None else ""
    mode = "auto-record" if state.mode == "auto" else state.mode
    ex = Exchange(
        t0=t0,
        started_us=started_us,
        mode=mode,
        method=request.method,
        path=path,
        query=query,
        req_headers=headers,
        body=body,
        fp=fp,
        tags=tags,
        upstream_url=state.upstream_label,
    )
    if state.index is not None:
        hit = state.index.take(state.index.key_for(request.method, path, query, body, fp), wrap=state.mode == "replay")
        if hit is None and state.mode == "replay":
            state.stats.misses += 1
            nearest = state.index.nearest(request.method, path, query, body)
            message = describe_miss(request.method, path, fp, nearest)
            extra = {}
            if nearest is not None:
                extra["nearest"] = {"cassette": nearest[0].cassette, "id": nearest[0].id, "differs": nearest[1]}
            missed = error_response(404, message, type="invalid_request_error", code="replay_miss", **extra)
            # Recorded in the replay cassette: a replayed run's scores then show what it asked that was never
            # recorded, instead of a gap.
            assert isinstance(missed.body, bytes)
            headers = [[k, v] for k, v in missed.headers.items()]
            ex.answered_by_proxy(missed.status, headers, missed.body, UPSTREAM_ERROR, message)
            state.finish(ex)
            return missed
    else:
        hit = None
    task = asyncio.current_task()
    assert task is not None
    state.begin(ex, task)
    try:
        if hit is not None:
            ex.mode = "replay"
            state.stats.replayed += 1
            return await serve_recorded(request, state, ex, hit)
        return await forward(request, state, ex)
    except asyncio.CancelledError:
        why = "the proxy shut down before the exchange finished" if state.closing else "the client went away"
        ex.fail(CLIENT_DISCONNECTED, why)
        raise
    finally:
        state.finish(ex)


def build_server(state: ProxyState) -> ProxyServer:
    return ProxyServer(partial(handle, state), request_factory=_make_request, handler_cancellation=True)
