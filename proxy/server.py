"""Running the proxy in-process: `start_proxy()` and the `RunningProxy` handle (the API `bench record` uses)."""

from __future__ import annotations

import asyncio
import dataclasses
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
from aiohttp import web
from yarl import URL

from bench.core.cassette import CassetteWriter, Redactor, new_cassette_path
from bench.core.cassette.records import RunMeta, ServerInfo, Settings
from bench.core.errors import BenchError
from bench.core.serving import listen
from bench.proxy import lag as loop_lag
from bench.proxy import modes
from bench.proxy.app import ClientLimits, build_server
from bench.proxy.forward import SKIP_AUTO_HEADERS
from bench.proxy.matching import MatchOptions
from bench.proxy.recordings import ReplayIndex, parse_pace
from bench.proxy.sink import Sink, writer_failed
from bench.proxy.state import ProxyState, ProxyStats

# TCPConnector's default limit of 100 would queue streams inside the proxy beyond 100 concurrent ones (docs/proxy.md).
UPSTREAM_CONNECTIONS = 4096


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
    """A proxy serving on `url`; `close()` stops it and closes its cassette."""

    def __init__(
        self,
        *,
        url: str,
        state: ProxyState,
        runner: web.BaseRunner | None,
        site: web.TCPSite | None,
        cassette_path: Path | None,
    ) -> None:
        self.url = url
        self.cassette_path = cassette_path
        self._state = state
        self._runner = runner
        self._site = site
        self._closed = False
        self._hurry = asyncio.Event()

    @property
    def stats(self) -> ProxyStats:
        return self._state.stats

    @property
    def state(self) -> ProxyState:
        """What `bench.proxy.app.serve_with` needs to route requests to a proxy started with `serve=False`."""
        return self._state

    @property
    def mode(self) -> str:
        return self._state.mode.name

    @property
    def in_flight(self) -> int:
        return len(self._state.in_flight)

    def hurry(self) -> None:
        """End the grace period of a running `close()` now (a second Ctrl-C)."""
        self._hurry.set()

    async def close(self, *, interrupted: bool = False, grace: float = 10.0) -> None:
        """Stop accepting, let in-flight exchanges finish within `grace` seconds, then close the cassette."""
        if self._closed:
            return
        self._closed = True
        state = self._state
        state.closing = True
        if self._site is not None:
            await self._site.stop()
        if state.in_flight:
            idle = asyncio.ensure_future(state.idle.wait())
            hurry = asyncio.ensure_future(self._hurry.wait())
            await asyncio.wait({idle, hurry}, timeout=grace, return_when=asyncio.FIRST_COMPLETED)
            idle.cancel()
            hurry.cancel()
        late = list(state.in_flight.values())
        state.cutting_off = bool(late)
        for task in late:
            task.cancel()  # each handler records its exchange as cut off by the shutdown
        if late:
            await asyncio.wait(late, timeout=5.0)
        if self._runner is not None:
            await self._runner.cleanup()
        sink = state.recording.sink
        if sink is not None and sink.pending:
            await asyncio.gather(*sink.pending, return_exceptions=True)
        if state.session is not None:
            await state.session.close()
        if sink is not None and sink.loop_lag is not None:
            loop_lag.uninstall(asyncio.get_running_loop(), sink.loop_lag)
            sink.loop_lag = None
        if sink is not None:
            s = state.stats
            await self._close_writer(
                interrupted=interrupted or bool(late),
                cut_by_shutdown=len(late),
                errors=s.errors,
                replayed=s.replayed,
                misses=s.misses,
                client_disconnects=s.client_disconnects,
            )

    async def _close_writer(self, **end: Any) -> None:
        writer = self._state.writer
        assert writer is not None
        try:
            await writer.aclose(**end)
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
        return self._state.writer.stats.failure if self._state.writer is not None else None

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
) -> RunningProxy:
    """Start a proxy. `cassette` writes exactly that file instead of a new one in `cassettes` (which replay then
    reads, a folder or one file); `replay_log=False` writes nothing in replay mode; `repeat=False` answers a replayed
    request asked more often than it was recorded as a miss; `serve=False` listens nowhere, for a caller that routes
    requests itself (`bench.proxy.app.serve_with`, as the pytest plugin does to keep one address across tests); `limits`
    bound slow clients (default: nginx's)."""
    chosen = modes.get(mode)
    pace_factor = parse_pace(pace)
    if upstream is None and chosen.forwards:
        raise BenchError(f"--mode {mode} forwards requests and needs --upstream URL (only replay works without one)")
    target, label = public_url(upstream) if upstream is not None else (None, None)
    cassettes = Path(cassettes)

    index: ReplayIndex | None = None
    if chosen.replays:
        index = ReplayIndex.load(cassettes, match or MatchOptions())
    chosen.check(index, cassettes)

    base = redactor or Redactor()
    secrets = tuple(v for v in (upstream_key, client_token) if v)
    redactor = dataclasses.replace(base, extra_values=base.extra_values + secrets)

    state = ProxyState(
        mode=chosen,
        upstream=target,
        upstream_label=label,
        pace=pace_factor,
        session=None,
        index=index,
        upstream_key=upstream_key,
        client_token=client_token,
        secret_headers=redactor.headers,
        idle_timeout=idle_timeout,
        repeat=repeat,
    )
    runner: web.BaseRunner | None = None
    site: web.TCPSite | None = None
    url = ""
    if serve:
        runner, site, url = await listen(build_server(state, limits), host, port)

    if chosen.forwards:
        state.session = aiohttp.ClientSession(
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
    cassette_path: Path | None = None
    if chosen.writes_cassette(replay_log):
        cassette_path = cassette or new_cassette_path(cassettes, prefix=chosen.cassette_prefix)
        settings = Settings(
            upstream=label,
            mode=mode,
            pace=pace,
            listen=url,
            upstream_key=upstream_key is not None,
            client_token=client_token is not None,
            request_timeout=request_timeout,
            idle_timeout=idle_timeout,
            replay_sources=index.files if index is not None else 0,
            # How replayed requests were matched to recordings (strict unless match options were given).
            match=index.match.describe() if index is not None else None,
        )
        try:
            writer = CassetteWriter(
                cassette_path,
                settings=settings,
                run=run,
                server=msgspec.UNSET if server is None else server,
                redactor=redactor,
                on_failure=partial(writer_failed, cassette_path),
            )
        except BenchError:
            if state.session is not None:
                await state.session.close()
            if runner is not None:
                await runner.cleanup()
            raise
        sink = Sink(writer, state.stats)
        sink.loop_lag = loop_lag.install(asyncio.get_running_loop())
        state.recording.sink = sink
    return RunningProxy(url=url, state=state, runner=runner, site=site, cassette_path=cassette_path)
