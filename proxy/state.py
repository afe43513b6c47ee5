"""The proxy's shared state: settings, the upstream session, the cassette writer, the replay index, counters."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from dataclasses import dataclass, field
from time import monotonic_ns
from typing import Any

import aiohttp
from yarl import URL

from bench.cassette import CassetteWriter
from bench.cassette.format import CLIENT_DISCONNECTED
from bench.cassette.writer import WriterClosed
from bench.fingerprint import fingerprint
from proxy.recorder import Exchange
from proxy.replay import ReplayIndex

log = logging.getLogger("bench.proxy")

RECORD_DELAY = 0.002
MAX_RECORD_WAIT = 0.02
MAX_RECORD_HOLD_NS = 1_000_000

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
    seq: int = 0
    in_flight: dict[Exchange, asyncio.Task[Any]] = field(default_factory=dict)
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    pending_records: set[asyncio.Task[None]] = field(default_factory=set)
    miss_messages: list[str] = field(default_factory=list)  # each replay miss's message, in order
    miss_hint: str = "record it with --mode auto or fix the request"  # how a miss's message says to fix it

    def target(self, path: str, query: str) -> URL:
        """The upstream URL for a request path: the upstream's base path is prepended unless already there."""
        base = self._base_path
        if base and not (path == base or path.startswith(base + "/")):
            path = base + path
        return URL(self._origin + path + (f"?{query}" if query else ""), encoded=True)

    def __post_init__(self) -> None:
        self._finished: deque[tuple[Exchange, int]] = deque()
        self._drainer: asyncio.Task[None] | None = None
        self.awaiting: set[Exchange] = set()  # exchanges whose first response byte has not been sent yet
        self._quiet = asyncio.Event()
        self._origin = str(self.upstream.origin()) if self.upstream is not None else ""
        self._base_path = self.upstream.raw_path.rstrip("/") if self.upstream is not None else ""

    def begin(self, ex: Exchange, task: asyncio.Task[Any]) -> None:
        self.in_flight[ex] = task
        self.awaiting.add(ex)
        if self.idle.is_set():
            self.idle.clear()

    def first_byte_sent(self, ex: Exchange) -> None:
        self.awaiting.discard(ex)
        if not self.awaiting:
            self._quiet.set()

    async def persist(self, ex: Exchange) -> None:
        """Write a forwarded exchange's record before its response ends: once the client has the whole answer, kill -9
        of the proxy cannot lose it. Only the end of the response waits (every event has gone through); building the
        record is the same work the drain below would do, at the moment the exchange ends instead of a little later."""
        if self.writer is None or ex.persisted:
            return
        end = monotonic_ns()
        ex.settle_stream()
        ex.persisted = True
        self._number(ex)
        record = self._build(ex, end)
        if record is not None:
            await self._put(record, durable=True)

    def finish(self, ex: Exchange) -> None:
        """Queue a finished exchange for the writer unless `persist` wrote it; the handler never waits for that."""
        end = monotonic_ns()
        self.in_flight.pop(ex, None)
        self.first_byte_sent(ex)
        if not ex.persisted:
            ex.settle_stream()
        if not self.in_flight:
            self.idle.set()
        if ex.outcome == CLIENT_DISCONNECTED:
            self.stats.client_disconnects += 1
        if self.writer is None or ex.persisted:
            return
        self._number(ex)
        self._finished.append((ex, end))
        # One task drains every exchange that finished meanwhile: under load, far fewer tasks than exchanges.
        if self._drainer is None:
            self._drainer = asyncio.get_running_loop().create_task(self._drain())
            self.pending_records.add(self._drainer)

    async def _drain(self) -> None:
        try:
            # Building and packing records waits until no exchange is waiting for its first byte (or MAX_RECORD_WAIT
            # has passed): a client's next request reaches the upstream and its first token goes back undelayed,
            # and this work runs while the proxy waits on the network.
            await asyncio.sleep(RECORD_DELAY)
            while self._finished:
                if self.awaiting:
                    self._quiet.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._quiet.wait(), MAX_RECORD_WAIT)
                since = monotonic_ns()
                for _ in range(len(self._finished)):
                    ex, end = self._finished.popleft()
                    record = self._build(ex, end)
                    if record is not None:
                        await self._put(record)
                    if monotonic_ns() - since > MAX_RECORD_HOLD_NS:
                        # A burst of records must not hold the loop; between yields they reach the writer thread
                        # together (fewer wake-ups, larger compressed blocks).
                        await asyncio.sleep(0)
                        since = monotonic_ns()
        finally:
            if self._drainer is not None:
                self.pending_records.discard(self._drainer)
            self._drainer = None

    def _number(self, ex: Exchange) -> None:
        self.seq += 1
        ex.seq = self.seq
        self.stats.exchanges += 1

    def _build(self, ex: Exchange, end: int) -> dict[str, Any] | None:
        """The exchange's record, or None (counted as lost) if building it fails."""
        try:
            ex.identify()
            if not ex.fp:
                ex.fp = fingerprint(ex.method, ex.path, ex.query, ex.body)
            return ex.to_record(end)
        except Exception:  # a bug on odd bytes must cost one record, not every later one
            log.exception("bench proxy: could not build the record of exchange x%d", ex.seq)
            self.stats.exchanges -= 1
            self.stats.lost += 1
            return None

    async def _put(self, record: dict[str, Any], durable: bool = False) -> None:
        assert self.writer is not None
        try:
            if durable:
                await self.writer.put_durable(record)
            else:
                await self.writer.put_async(record)
        except WriterClosed as exc:
            # Disk full or file removed: keep serving (the clients are not at fault), count and say it once.
            self.stats.exchanges -= 1
            self.stats.lost += 1
            if self.stats.lost == 1:
                log.error("bench proxy: cannot record: %s; exchanges are forwarded but not recorded", exc)
