"""`passthrough`: forward every request to the upstream, record nothing."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING

from bench.proxy.modes import Mode, mode

if TYPE_CHECKING:
    from aiohttp import web

    from bench.proxy.forward import Upstream
    from bench.proxy.recorder import Exchange


@mode("passthrough")
class Passthrough(Mode):
    recorded_as = "passthrough"
    records = False

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream

    def respond(self, request: web.BaseRequest, ex: Exchange) -> Awaitable[web.StreamResponse]:
        return self.upstream.forward(request, ex)
