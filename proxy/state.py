"""The proxy's connection and session state: settings, the mode, the upstream session, the replay index, the
exchanges in flight and the counters. Where exchanges are recorded is its `recording` (bench.proxy.sink)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from yarl import URL

from bench.core.cassette import CassetteWriter
from bench.core.cassette.format import CLIENT_DISCONNECTED
from bench.proxy.modes import Mode
from bench.proxy.recorder import Exchange
from bench.proxy.recordings import ReplayIndex
from bench.proxy.sink import Recording
from bench.proxy.starts import StartSlices
from bench.proxy.watchdog import IdleSweep


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
    mode: Mode
    upstream: URL | None
    upstream_label: str | None  # the upstream URL without credentials, as recorded
    pace: float
    session: aiohttp.ClientSession | None
    index: ReplayIndex | None
    upstream_key: str | None
    client_token: str | None
    secret_headers: frozenset[str]
    idle_timeout: float | None = None
    repeat: bool = True  # replay mode: a used-up fingerprint starts again from its first recording
    stats: ProxyStats = field(default_factory=ProxyStats)
    closing: bool = False
    cutting_off: bool = False  # the shutdown's grace ran out: it cancels the exchanges still in flight
    in_flight: dict[Exchange, asyncio.Task[Any]] = field(default_factory=dict)
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    miss_messages: list[str] = field(default_factory=list)  # each replay miss's message, in order
    miss_hint: str = "record it with --mode auto or fix the request"  # how a miss's message says to fix it
    recording: Recording = field(default_factory=Recording)  # its sink None: records nothing
    starts: StartSlices = field(default_factory=StartSlices)  # request starts spread over loop iterations
    idle_sweep: IdleSweep | None = None  # the idle timeout's one timer (bench.proxy.watchdog); made from idle_timeout

    def __post_init__(self) -> None:
        if self.idle_timeout and self.idle_sweep is None:
            self.idle_sweep = IdleSweep(self.idle_timeout)
        self._origin = str(self.upstream.origin()) if self.upstream is not None else ""
        self._base_path = self.upstream.raw_path.rstrip("/") if self.upstream is not None else ""

    @property
    def writer(self) -> CassetteWriter | None:
        return self.recording.writer

    def target(self, path: str, query: str) -> URL:
        """The upstream URL for a request path: the upstream's base path is prepended unless already there."""
        base = self._base_path
        if base and not (path == base or path.startswith(base + "/")):
            path = base + path
        return URL(self._origin + path + (f"?{query}" if query else ""), encoded=True)

    def begin(self, ex: Exchange, task: asyncio.Task[Any]) -> None:
        self.in_flight[ex] = task
        if self.idle.is_set():
            self.idle.clear()

    async def persist(self, ex: Exchange) -> None:
        await self.recording.persist(ex)

    def finish(self, ex: Exchange) -> None:
        """Queue a finished exchange for the writer unless `persist` wrote it; the handler never waits for that."""
        self.in_flight.pop(ex, None)
        if not self.in_flight:
            self.idle.set()
        if ex.outcome == CLIENT_DISCONNECTED:
            self.stats.client_disconnects += 1
        self.recording.finish(ex)
