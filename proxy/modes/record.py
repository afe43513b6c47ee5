"""`record`: forward every request to the upstream and record each exchange."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.proxy.modes import Mode, mode

if TYPE_CHECKING:
    from aiohttp import web

    from bench.proxy.recorder import Exchange
    from bench.proxy.state import ProxyState


@mode("record")
class Record(Mode):
    recorded_as = "record"

    def __init__(self) -> None:
        from bench.proxy.forward import forward

        self.forward = forward

    async def respond(self, request: web.BaseRequest, state: ProxyState, ex: Exchange) -> web.StreamResponse:
        return await self.forward(request, state, ex)
