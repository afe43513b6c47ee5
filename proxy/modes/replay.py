"""`replay`: answer every request from the recordings, never the network; a request nothing recorded matches gets
an OpenAI-shaped 404 naming the nearest recorded request, and is recorded as such."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bench.core.errors import BenchError
from bench.proxy.modes import Mode, mode

if TYPE_CHECKING:
    from aiohttp import web

    from bench.proxy.recorder import Exchange
    from bench.proxy.recordings import ReplayIndex
    from bench.proxy.state import ProxyState


@mode("replay")
class Replay(Mode):
    recorded_as = "replay"
    forwards = False  # no upstream session at all: replay must never open a network connection
    replays = True
    cassette_prefix = "replay"

    def check(self, index: ReplayIndex | None, cassettes: Path) -> None:
        if not index:
            raise BenchError(f"no recorded exchanges in {cassettes} to replay; record first (--mode record or auto)")

    def writes_cassette(self, replay_log: bool) -> bool:
        return replay_log

    def __init__(self) -> None:
        from bench.proxy.forward import serve_recorded

        self.serve_recorded = serve_recorded

    async def respond(self, request: web.BaseRequest, state: ProxyState, ex: Exchange) -> web.StreamResponse:
        index = state.index
        assert index is not None
        # A used-up fingerprint starts again from its first recording unless the proxy was told not to repeat.
        hit = index.take(index.key_for(ex.method, ex.path, ex.query, ex.body, ex.fp), wrap=state.repeat)
        if hit is None:
            return await _miss(state, ex, index)
        state.stats.replayed += 1
        return await self.serve_recorded(request, state, ex, hit)


async def _miss(state: ProxyState, ex: Exchange, index: ReplayIndex) -> web.Response:
    from bench.core.cassette.format import UPSTREAM_ERROR
    from bench.proxy.error_responses import error_response
    from bench.proxy.recordings import describe_miss

    state.stats.misses += 1
    nearest = index.nearest(ex.method, ex.path, ex.query, ex.body)
    message = describe_miss(ex.method, ex.path, ex.fp, nearest, hint=state.miss_hint)
    state.miss_messages.append(message)
    extra = {}
    if nearest is not None:
        extra["nearest"] = {"cassette": nearest[0].cassette, "id": nearest[0].id, "differs": nearest[1]}
    missed = error_response(404, message, type="invalid_request_error", code="replay_miss", **extra)
    # Recorded in the replay cassette: a replayed run's scores then show what it asked that was never recorded,
    # instead of a gap.
    assert isinstance(missed.body, bytes)
    headers = [[str(k), v] for k, v in missed.headers.items()]  # str: a record holds plain strings, not istr
    ex.answered_by_proxy(missed.status, headers, missed.body, UPSTREAM_ERROR, message)
    await state.persist(ex)  # in the cassette before the client has the answer, as every response
    return missed
