"""The aiohttp application: one catch-all route that authenticates, then replays, forwards or answers a miss."""

from __future__ import annotations

import asyncio
import hmac
import time
from time import monotonic_ns

from aiohttp import web

from bench.cassette.format import CLIENT_DISCONNECTED
from bench.fingerprint import fingerprint
from proxy.errors import error_response, shutting_down, unauthorized
from proxy.forward import TAG_PREFIX, forward, serve_recorded
from proxy.recorder import Exchange
from proxy.replay import describe_miss, match_key
from proxy.state import ProxyState

STATE = web.AppKey("bench_proxy_state", ProxyState)

# Request bodies are read whole (they are fingerprinted and recorded); chat requests with images can be large.
MAX_REQUEST_BODY = 256 << 20


def _authorized(request: web.Request, token: str) -> bool:
    presented = request.headers.get("Authorization", "")
    scheme, _, value = presented.partition(" ")
    if scheme.lower() != "bearer":
        value = request.headers.get("api-key", "")
    return hmac.compare_digest(value.strip().encode(), token.encode())


async def handle(request: web.Request) -> web.StreamResponse:
    t0 = monotonic_ns()
    started_us = time.time_ns() // 1000
    state = request.app[STATE]
    if state.closing:
        return shutting_down()
    if state.client_token is not None and not _authorized(request, state.client_token):
        state.stats.rejected += 1
        return unauthorized()
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
        hit = state.index.take(match_key(fp, body), wrap=state.mode == "replay")
        if hit is None and state.mode == "replay":
            state.stats.misses += 1
            nearest = state.index.nearest(request.method, path, query, body)
            message = describe_miss(request.method, path, fp, nearest)
            extra = {}
            if nearest is not None:
                extra["nearest"] = {"cassette": nearest[0].cassette, "id": nearest[0].id, "differs": nearest[1]}
            return error_response(404, message, type="invalid_request_error", code="replay_miss", **extra)
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


def build_app(state: ProxyState) -> web.Application:
    app = web.Application(client_max_size=MAX_REQUEST_BODY)
    app[STATE] = state
    app.router.add_route("*", "/{tail:.*}", handle)
    return app
