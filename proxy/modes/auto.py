"""`auto`: replay what the recordings hold (each recording once), forward and record the rest."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING

from bench.proxy.modes import Mode, mode
from bench.proxy.modes.replay import Replay

if TYPE_CHECKING:
    from aiohttp import web

    from bench.proxy.forward import Upstream
    from bench.proxy.playback import Playback
    from bench.proxy.recorder import Exchange


@mode("auto")
class Auto(Mode):
    recorded_as = "auto-record"  # a forwarded exchange; a replayed one is recorded as a replay

    def __init__(self, upstream: Upstream, recordings: Playback) -> None:
        self.upstream = upstream
        self.recordings = recordings

    def respond(self, request: web.BaseRequest, ex: Exchange) -> Awaitable[web.StreamResponse]:
        # A used-up fingerprint is a miss: the extra request is forwarded and recorded.
        hit = self.recordings.take(ex, wrap=False)
        if hit is None:
            return self.upstream.forward(request, ex)
        return self.recordings.serve(request, ex, hit, mode=Replay.recorded_as)
