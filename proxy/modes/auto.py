"""`auto`: replay what the recordings hold (each recording once), forward and record the rest."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.proxy.modes import Mode, mode
from bench.proxy.modes.replay import Replay

if TYPE_CHECKING:
    from aiohttp import web

    from bench.proxy.recorder import Exchange
    from bench.proxy.state import ProxyState


@mode("auto")
class Auto(Mode):
    recorded_as = "auto-record"  # a forwarded exchange; a replayed one is recorded as a replay
    replays = True

    def __init__(self) -> None:
        from bench.proxy.forward import forward, serve_recorded

        self.forward = forward
        self.serve_recorded = serve_recorded

    async def respond(self, request: web.BaseRequest, state: ProxyState, ex: Exchange) -> web.StreamResponse:
        index = state.index
        assert index is not None
        # A used-up fingerprint is a miss: the extra request is forwarded and recorded.
        hit = index.take(index.key_for(ex.method, ex.path, ex.query, ex.body, ex.fp), wrap=False)
        if hit is None:
            return await self.forward(request, state, ex)
        ex.mode = Replay.recorded_as
        state.stats.replayed += 1
        return await self.serve_recorded(request, state, ex, hit)
