"""`passthrough`: forward every request to the upstream, record nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from proxy.modes import Mode, mode

if TYPE_CHECKING:
    from aiohttp import web

    from proxy.recorder import Exchange
    from proxy.state import ProxyState


@mode("passthrough")
class Passthrough(Mode):
    recorded_as = "passthrough"
    records = False

    def __init__(self) -> None:
        from proxy.forward import forward

        self.forward = forward

    async def respond(self, request: web.BaseRequest, state: ProxyState, ex: Exchange) -> web.StreamResponse:
        return await self.forward(request, state, ex)
