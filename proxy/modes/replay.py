"""`replay`: answer every request from the recordings, never the network; a request nothing recorded matches gets
an OpenAI-shaped 404 naming the nearest recorded request, and is recorded as such."""

from __future__ import annotations

from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING

from bench.core.errors import BenchError
from bench.proxy.modes import Mode, mode

if TYPE_CHECKING:
    from aiohttp import web

    from bench.proxy.playback import Playback
    from bench.proxy.recorder import Exchange
    from bench.proxy.recordings import ReplayIndex


@mode("replay")
class Replay(Mode):
    recorded_as = "replay"
    cassette_prefix = "replay"

    def __init__(self, recordings: Playback) -> None:
        self.recordings = recordings

    @classmethod
    def check(cls, index: ReplayIndex | None, cassettes: Path) -> None:
        if not index:
            raise BenchError(f"no recorded exchanges in {cassettes} to replay; record first (--mode record or auto)")

    @classmethod
    def writes_cassette(cls, replay_log: bool) -> bool:
        return replay_log

    def respond(self, request: web.BaseRequest, ex: Exchange) -> Awaitable[web.StreamResponse]:
        # A used-up fingerprint starts again from its first recording unless the proxy was told not to repeat.
        hit = self.recordings.take(ex, wrap=self.recordings.repeat)
        if hit is None:
            return self.recordings.miss(ex)
        return self.recordings.serve(request, ex, hit)
