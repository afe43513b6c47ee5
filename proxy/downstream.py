"""The client's side of an exchange, whoever answers it (the upstream, bench.proxy.forward; the recordings,
bench.proxy.playback): the response headers it is sent, and the two ways a response ends: whole, its record in the
cassette first, or cut off the way the upstream cut it."""

from __future__ import annotations

import asyncio

from aiohttp import web
from multidict import CIMultiDict

from bench.proxy.recorder import Exchange
from bench.proxy.sink import Recording

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)


def client_headers(headers: list[list[str]]) -> CIMultiDict[str]:
    """A response's headers as its client gets them: without hop-by-hop headers and those its Connection lists."""
    listed: set[str] = set()
    for name, value in headers:
        if name.lower() == "connection":
            listed.update(token.strip().lower() for token in value.split(","))
    out: CIMultiDict[str] = CIMultiDict()
    for name, value in headers:
        low = name.lower()
        if low not in HOP_BY_HOP and low not in listed:
            out.add(name, value)
    return out


def abort_client(request: web.BaseRequest) -> None:
    """Cut the client's connection the way the upstream cut ours, so it sees an incomplete body, not a clean end."""
    transport = request.transport
    if transport is not None:
        transport.close()


async def end_whole(recording: Recording, ex: Exchange, response: web.StreamResponse) -> None:
    """End a response whose every body byte the client was sent: its record reaches the file first (kill -9 cannot
    lose an answer its client has whole, and the client's next request cannot overtake it in the cassette)."""
    try:
        await recording.persist(ex)
        await response.write_eof()
    except ConnectionError:
        pass  # the client had the whole body and closed before its terminating chunk: a whole answer
    except asyncio.CancelledError:
        # Cancelled (the client left, or the proxy shuts down) while the record is written: it is queued already,
        # and the client had every byte of the body, so the exchange stays complete.
        uncancel()


def uncancel() -> None:
    """Undo the cancellation just caught: the handler goes on to finish the exchange."""
    task = asyncio.current_task()
    assert task is not None
    task.uncancel()
