"""The proxy's counters, and the exchanges in flight with how far the proxy is in stopping."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from bench.proxy.recorder import Exchange


@dataclass
class ProxyStats:
    exchanges: int = 0  # records handed to the cassette writer
    errors: int = 0  # upstream errors and timeouts (the client got a 502/504 or a cut stream)
    replayed: int = 0
    misses: int = 0  # replay misses answered with 404
    rejected: int = 0  # clients without the proxy's token
    client_disconnects: int = 0
    lost: int = 0  # finished exchanges the cassette writer could not take (its file failed)
    bad_requests: int = 0  # malformed (400), too large (413) or too slow a body (408): answered, not recorded
    slow_clients: int = 0  # connections closed for a request head not complete within the header timeout


class Flights:
    """The exchanges in flight, each with its handler's task, and the shutdown's stage: `closing` (no new exchange
    begins), then `cutting_off` (its grace ran out: it cancels the handlers still running)."""

    __slots__ = ("closing", "cutting_off", "idle", "tasks")

    def __init__(self) -> None:
        self.tasks: dict[Exchange, asyncio.Task[Any]] = {}
        self.idle = asyncio.Event()  # set while none is in flight (once one has been)
        self.closing = False
        self.cutting_off = False

    def __len__(self) -> int:
        return len(self.tasks)

    def begin(self, ex: Exchange, task: asyncio.Task[Any]) -> None:
        self.tasks[ex] = task
        if self.idle.is_set():
            self.idle.clear()

    def end(self, ex: Exchange) -> None:
        self.tasks.pop(ex, None)
        if not self.tasks:
            self.idle.set()
