"""The proxy's shared state: settings, the upstream session, the cassette writer, the replay index, counters."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from time import monotonic_ns
from typing import Any

import aiohttp
from yarl import URL

from bench.cassette import CassetteWriter
from bench.cassette.format import CLIENT_DISCONNECTED
from proxy.lag import LoopLag
from proxy.persist import Persister
from proxy.recorder import Exchange
from proxy.replay import ReplayIndex

log = logging.getLogger("bench.proxy")

MODES = ("record", "replay", "auto", "passthrough")


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


@dataclass
class ProxyState:
    mode: str
    upstream: URL | None
    upstream_label: str | None  # the upstream URL without credentials, as recorded
    pace: float
    session: aiohttp.ClientSession | None
    writer: CassetteWriter | None
    index: ReplayIndex | None
    upstream_key: str | None
    client_token: str | None
    secret_headers: frozenset[str]
    idle_timeout: float | None = None
    repeat: bool = True  # replay mode: a used-up fingerprint starts again from its first recording
    stats: ProxyStats = field(default_factory=ProxyStats)
    closing: bool = False
    in_flight: dict[Exchange, asyncio.Task[Any]] = field(default_factory=dict)
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    miss_messages: list[str] = field(default_factory=list)  # each replay miss's message, in order
    miss_hint: str = "record it with --mode auto or fix the request"  # how a miss's message says to fix it

    def target(self, path: str, query: str) -> URL:
        """The upstream URL for a request path: the upstream's base path is prepended unless already there."""
        base = self._base_path
        if base and not (path == base or path.startswith(base + "/")):
            path = base + path
        return URL(self._origin + path + (f"?{query}" if query else ""), encoded=True)

    def __post_init__(self) -> None:
        self.records: Persister | None = None
        self.loop_lag: LoopLag | None = None  # set while the proxy records, if its loop can be timed
        if self.writer is not None:
            self.use_writer(self.writer)
        self._origin = str(self.upstream.origin()) if self.upstream is not None else ""
        self._base_path = self.upstream.raw_path.rstrip("/") if self.upstream is not None else ""

    def use_writer(self, writer: CassetteWriter) -> None:
        self.writer = writer
        self.records = Persister(writer, self.stats)

    @property
    def pending_records(self) -> list[asyncio.Task[None]]:
        """What closing must wait for before the cassette is closed: the task still building records."""
        task = self.records.task if self.records is not None else None
        return [task] if task is not None else []

    def begin(self, ex: Exchange, task: asyncio.Task[Any]) -> None:
        self.in_flight[ex] = task
        if self.idle.is_set():
            self.idle.clear()

    async def persist(self, ex: Exchange) -> None:
        """Write a forwarded exchange's record before its response ends: once the client has the whole answer, kill -9
        of the proxy cannot lose it. Only the end of the response waits (every event has gone through)."""
        if self.records is None or ex.persisted:
            return
        end = monotonic_ns()
        ex.persisted = True
        self._note_lag(ex)
        await self.records.durable(ex, end)

    def finish(self, ex: Exchange) -> None:
        """Queue a finished exchange for the writer unless `persist` wrote it; the handler never waits for that."""
        end = monotonic_ns()
        self.in_flight.pop(ex, None)
        if not self.in_flight:
            self.idle.set()
        if ex.outcome == CLIENT_DISCONNECTED:
            self.stats.client_disconnects += 1
        if self.records is None or ex.persisted:
            return
        self._note_lag(ex)
        self.records.later(ex, end)

    def _note_lag(self, ex: Exchange) -> None:
        if self.loop_lag is not None:
            ex.loop_lag_ns = self.loop_lag.since(ex.t0)

    def writer_failed(self, why: str, unwritten: int) -> None:
        """Called by the cassette writer's thread, at once, when its file fails (disk full, file removed)."""
        path = self.writer.path if self.writer is not None else "the cassette"
        log.error(
            "bench proxy: cannot record to %s: %s; %d exchange(s) not recorded so far; "
            "exchanges are still forwarded, not recorded",
            path,
            why,
            unwritten,
        )
