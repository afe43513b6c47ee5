"""Running the proxy in-process: `start_proxy()` and the `RunningProxy` handle (the API `bench record` uses)."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
from aiohttp import web
from yarl import URL

from bench.core.cassette import CassetteWriter, Redactor, new_cassette_path
from bench.core.cassette.records import End, Header, RunMeta, ServerInfo, Settings, Shard
from bench.core.errors import BenchError
from bench.core.serving import listen, serve_on
from bench.proxy import lag as loop_lag
from bench.proxy import modes
from bench.proxy.app import ClientLimits, Handler, serve_with
from bench.proxy.forward import SKIP_AUTO_HEADERS, Credentials, Upstream
from bench.proxy.matching import MatchOptions
from bench.proxy.playback import MISS_HINT, Playback
from bench.proxy.recordings import Recorded, ReplayIndex, parse_pace
from bench.proxy.sink import Recording, Sink, writer_failed
from bench.proxy.state import Flights, ProxyStats
from bench.proxy.watchdog import IdleSweep

# TCPConnector's default limit of 100 would queue streams inside the proxy beyond 100 concurrent ones (docs/proxy.md).
UPSTREAM_CONNECTIONS = 4096


@dataclass(frozen=True)
class Worker:
    """One process of `bench proxy --workers N` (bench.proxy.workers): the listening socket it accepts on (its own, in
    the port's SO_REUSEPORT group), its shard of the run (the cassette header's `shard`), and the recordings every
    worker answers from, loaded once before the workers were forked, their cursors shared (replay, auto)."""

    sock: socket.socket
    shard: Shard
    index: ReplayIndex | None = None


def public_url(url: str) -> tuple[URL, str]:
    """The upstream URL to use, and the same without credentials or query for records and messages."""
    try:
        parsed = URL(url)
        host = parsed.host
    except ValueError:
        host = None
    if host is None or parsed.scheme not in ("http", "https"):
        raise BenchError("bad --upstream; give a base URL such as http://127.0.0.1:8000")
    if parsed.raw_user is not None or parsed.raw_password is not None:
        # Never forwarded (aiohttp would turn them into Basic auth) and never shown: refused, and the URL not repeated.
        raise BenchError(
            "--upstream holds credentials (user:password@); bench never sends them: give the key in BENCH_API_KEY "
            "or name its variable with --upstream-key-env, and the URL without them"
        )
    label = str(parsed.with_user(None).with_query(None).with_fragment(None)).rstrip("/")
    return parsed, label


class RunningProxy:
    """A proxy serving on `url` (or, started with `serve=False`, answering what `handle` is given); `close()` stops
    it and closes its cassette."""

    def __init__(
        self,
        *,
        url: str,
        handle: Handler,
        upstream: Upstream | None,
        playback: Playback | None,
        runner: web.BaseRunner | None,
        site: web.BaseSite | None,
        cassette_path: Path | None,
    ) -> None:
        self.url = url
        self.cassette_path = cassette_path
        self.handle = handle  # the request handler (`bench.proxy.app.serve_with` routes requests to it)
        self.recording = handle.recording  # the open cassette (a rotation replaces it)
        self._flights = handle.flights
        self._upstream = upstream
        self._playback = playback
        self._runner = runner
        self._site = site
        self._closed = False
        self._hurry = asyncio.Event()

    @property
    def stats(self) -> ProxyStats:
        return self.handle.stats

    @property
    def mode(self) -> str:
        return self.handle.mode.name

    @property
    def in_flight(self) -> int:
        return len(self._flights)

    @property
    def closing(self) -> bool:
        return self._flights.closing

    @property
    def index(self) -> ReplayIndex | None:
        """The recordings it replays (replay and auto modes)."""
        return self._playback.index if self._playback is not None else None

    @property
    def misses(self) -> list[str]:
        """Each replay miss's message, in order."""
        return self._playback.misses if self._playback is not None else []

    def unused(self) -> list[Recorded]:
        """The recordings no request has used so far."""
        return self._playback.index.unused() if self._playback is not None else []

    def hurry(self) -> None:
        """End the grace period of a running `close()` now (a second Ctrl-C)."""
        self._hurry.set()

    async def close(self, *, interrupted: bool = False, grace: float = 10.0) -> None:
        """Stop accepting, let in-flight exchanges finish within `grace` seconds, then close the cassette."""
        if self._closed:
            return
        self._closed = True
        late = await self._stop_serving(grace)
        sink = self.recording.sink
        if sink is not None and sink.pending:
            await asyncio.gather(*sink.pending, return_exceptions=True)
        if self._upstream is not None:
            await self._upstream.session.close()
        if sink is not None and sink.loop_lag is not None:
            loop_lag.uninstall(asyncio.get_running_loop(), sink.loop_lag)
            sink.loop_lag = None
        if sink is not None:
            s = self.stats
            end = End(
                interrupted=interrupted or bool(late),
                cut_by_shutdown=len(late),
                errors=s.errors,
                replayed=s.replayed,
                misses=s.misses,
                client_disconnects=s.client_disconnects,
            )
            await self._close_writer(end)

    async def _stop_serving(self, grace: float) -> list[asyncio.Task[Any]]:
        """Stop listening, wait up to `grace` seconds for the exchanges in flight, cut off those still running (each
        handler records its exchange as cut off by the shutdown); returns those."""
        flights = self._flights
        flights.closing = True
        if self._site is not None:
            await self._site.stop()
        if flights.tasks:
            idle = asyncio.ensure_future(flights.idle.wait())
            hurry = asyncio.ensure_future(self._hurry.wait())
            await asyncio.wait({idle, hurry}, timeout=grace, return_when=asyncio.FIRST_COMPLETED)
            idle.cancel()
            hurry.cancel()
        late = list(flights.tasks.values())
        flights.cutting_off = bool(late)
        for task in late:
            task.cancel()
        if late:
            await asyncio.wait(late, timeout=5.0)
        if self._runner is not None:
            await self._runner.cleanup()
        return late

    async def _close_writer(self, end: End) -> None:
        writer = self.recording.writer
        assert writer is not None
        try:
            await writer.aclose(end)
        except OSError as exc:
            raise BenchError(f"could not finish cassette {self.cassette_path}: {exc.strerror}") from None
        finally:
            # Records the writer had accepted when its file failed were counted as recorded: they are not.
            self.stats.exchanges -= writer.stats.unwritten
            self.stats.lost += writer.stats.unwritten
            writer.stats.unwritten = 0

    @property
    def recording_failure(self) -> str | None:
        """Why the cassette file failed (disk full...), if it did."""
        writer = self.recording.writer
        return writer.stats.failure if writer is not None else None

    async def __aenter__(self) -> RunningProxy:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def start_proxy(
    *,
    upstream: str | None,
    cassettes: Path,
    mode: str = "record",
    host: str = "127.0.0.1",
    port: int = 0,
    pace: str = "realtime",
    run: RunMeta | None = None,
    server: ServerInfo | None = None,
    upstream_key: str | None = None,
    client_token: str | None = None,
    request_timeout: float | None = None,
    idle_timeout: float | None = None,
    redactor: Redactor | None = None,
    limits: ClientLimits | None = None,
    cassette: Path | None = None,
    replay_log: bool = True,
    repeat: bool = True,
    serve: bool = True,
    match: MatchOptions | None = None,
    miss_hint: str = MISS_HINT,
    worker: Worker | None = None,
) -> RunningProxy:
    """Start a proxy. `cassette` writes exactly that file instead of a new one in `cassettes` (which replay then
    reads, a folder or one file); `replay_log=False` writes nothing in replay mode; `repeat=False` answers a replayed
    request asked more often than it was recorded as a miss; `serve=False` listens nowhere, for a caller that routes
    requests itself (`bench.proxy.app.serve_with`, as the pytest plugin does to keep one address across tests); `limits`
    bound slow clients (default: nginx's); `miss_hint` ends a replay miss's message (how to fix it); `worker`: serve
    as one of several processes (its socket, its shard, the shared recordings)."""
    chosen = modes.get(mode)
    pace_factor = parse_pace(pace)
    if upstream is None and chosen.forwards:
        raise BenchError(f"--mode {mode} forwards requests and needs --upstream URL (only replay works without one)")
    label = public_url(upstream)[1] if upstream is not None else None
    cassettes = Path(cassettes)
    index = None
    if chosen.replays:
        index = worker.index if worker is not None else None
        index = index if index is not None else ReplayIndex.load(cassettes, match or MatchOptions())
    chosen.check(index, cassettes)
    redactor = _with_secrets(redactor or Redactor(), upstream_key, client_token)
    stats, flights, recording = ProxyStats(), Flights(), Recording()
    forwarder = None
    if upstream is not None and chosen.forwards:
        credentials = Credentials(upstream_key, client_token, redactor.headers)
        forwarder = _forwarder(upstream, credentials, request_timeout, idle_timeout, recording, flights, stats)
    playback = None
    if index is not None:
        playback = Playback(index, recording, stats, pace=pace_factor, repeat=repeat, hint=miss_hint)
    answering = modes.build(chosen, forwarder, playback)
    handler = Handler(answering, flights, recording, stats, limits, client_token, upstream_label=label)
    path = None
    if chosen.writes_cassette(replay_log):
        path = cassette or new_cassette_path(cassettes, prefix=chosen.cassette_prefix)
    settings = _settings(label, mode, pace, upstream_key, client_token, (request_timeout, idle_timeout), index)
    address: tuple[str, int] | socket.socket | None = (host, port) if serve else None
    header = Header(settings=settings, run=run or RunMeta(), server=msgspec.UNSET if server is None else server)
    if worker is not None:
        address, header.shard = worker.sock, worker.shard
    runner, site, url = await _open(handler, forwarder, address, path, header, redactor)
    return RunningProxy(
        url=url, handle=handler, upstream=forwarder, playback=playback, runner=runner, site=site, cassette_path=path
    )


def _forwarder(
    upstream: str,
    credentials: Credentials,
    request_timeout: float | None,
    idle_timeout: float | None,
    recording: Recording,
    flights: Flights,
    stats: ProxyStats,
) -> Upstream:
    target, label = public_url(upstream)
    idle = IdleSweep(idle_timeout) if idle_timeout else None
    return Upstream(target, label, _session(request_timeout), credentials, recording, flights, stats, idle)


async def _open(
    handler: Handler,
    forwarder: Upstream | None,
    address: tuple[str, int] | socket.socket | None,
    path: Path | None,
    header: Header,
    redactor: Redactor,
) -> tuple[web.BaseRunner | None, web.BaseSite | None, str]:
    """Listen on `address` (a host and port, a listening socket, or None: nowhere) and open the cassette at `path`
    (None: none); what is open is closed again if either fails."""
    runner: web.BaseRunner | None = None
    site: web.BaseSite | None = None
    url = ""
    try:
        app = serve_with(handler, handler.limits, handler.stats)
        if isinstance(address, socket.socket):
            runner, site, url = await serve_on(app, address)
        elif address is not None:
            runner, site, url = await listen(app, *address)
        if path is not None:
            header.settings.listen = url
            handler.recording.sink = _sink(path, header, redactor, handler.stats)
    except BaseException:
        if forwarder is not None:
            await forwarder.session.close()
        if runner is not None:
            await runner.cleanup()
        raise
    return runner, site, url


def _settings(
    label: str | None,
    mode: str,
    pace: str,
    upstream_key: str | None,
    client_token: str | None,
    timeouts: tuple[float | None, float | None],
    index: ReplayIndex | None,
) -> Settings:
    """The cassette header's `settings`: how this proxy was set up (never a key: only whether one was set); the
    address it listens on is filled in once it does."""
    return Settings(
        upstream=label,
        mode=mode,
        pace=pace,
        upstream_key=upstream_key is not None,
        client_token=client_token is not None,
        request_timeout=timeouts[0],
        idle_timeout=timeouts[1],
        replay_sources=index.files if index is not None else 0,
        # How replayed requests were matched to recordings (strict unless match options were given).
        match=index.match.describe() if index is not None else None,
    )


def _with_secrets(redactor: Redactor, upstream_key: str | None, client_token: str | None) -> Redactor:
    """The redactor, also scrubbing the upstream key and the client token wherever they appear."""
    secrets = tuple(v for v in (upstream_key, client_token) if v)
    return dataclasses.replace(redactor, extra_values=redactor.extra_values + secrets)


def _session(request_timeout: float | None) -> aiohttp.ClientSession:
    """The upstream session every forwarded request shares."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=UPSTREAM_CONNECTIONS, limit_per_host=0),
        # The idle timeout is bench.proxy.watchdog, not sock_read (which costs a timer per read).
        timeout=aiohttp.ClientTimeout(total=request_timeout),
        auto_decompress=False,
        # On the session, not per request: aiohttp turns a request's own list into a new set on every request.
        skip_auto_headers=SKIP_AUTO_HEADERS,
        # A proxy must not keep one client's cookies and send them with another client's requests.
        cookie_jar=aiohttp.DummyCookieJar(),
        trust_env=False,
    )


def _sink(path: Path, header: Header, redactor: Redactor, stats: ProxyStats) -> Sink:
    """A new cassette at `path` (its header's settings, run and server as given) and the pipeline that records into
    it, its loop's stalls timed."""
    writer = CassetteWriter(
        path,
        settings=header.settings,
        run=header.run,
        server=header.server,
        shard=header.shard,
        redactor=redactor,
        on_failure=partial(writer_failed, path),
    )
    sink = Sink(writer, stats)
    sink.loop_lag = loop_lag.install(asyncio.get_running_loop())
    return sink
