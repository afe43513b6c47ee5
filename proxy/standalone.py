"""The proxy run on its own, as `bench proxy` runs it (`bench record` and the pytest plugin run it in-process with
`start_proxy`): started from checked options, serving until SIGINT/SIGTERM (a second one cuts the exchanges in
flight), rotating its cassette and uploading each closed one with `--cassettes URL`, then stopped with a summary.
bench.cli.proxy_command turns the command's flags into `ServiceOptions`."""

from __future__ import annotations

import asyncio
import gc
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.core.cassette import Redactor, new_cassette_path
from bench.core.errors import BenchError
from bench.core.spool import fetch_all, upload_leftovers
from bench.core.storage import upload
from bench.proxy import modes
from bench.proxy.app import ClientLimits
from bench.proxy.matching import MatchOptions
from bench.proxy.rotation import Rotator, rotation_first_path
from bench.proxy.server import RunningProxy, Worker, public_url, start_proxy

WHO = "bench proxy"


@dataclass(frozen=True)
class ServiceOptions:
    """What `bench proxy` was asked to do, its flags checked. With `remote` (an object-storage prefix), `cassettes`
    is the local spool each cassette is written to before its upload."""

    upstream: str | None
    cassettes: Path
    mode: str = "record"
    remote: str | None = None
    host: str = "127.0.0.1"
    port: int = 8080
    pace: str = "realtime"
    upstream_key: str | None = None
    client_token: str | None = None
    request_timeout: float | None = None
    idle_timeout: float | None = None
    limits: ClientLimits = field(default_factory=ClientLimits)
    redactor: Redactor = field(default_factory=Redactor)
    match: MatchOptions | None = None
    grace: float = 10.0
    rotate_size: int | None = None
    rotate_every: float | None = None
    workers: int = 1  # processes serving the port, each recording its own shard (bench.proxy.workers)

    @property
    def rotating(self) -> bool:
        return self.rotate_size is not None or self.rotate_every is not None


@dataclass(frozen=True)
class Seat:
    """How one worker process of `bench proxy --workers N` serves (bench.proxy.workers): its socket, shard and the
    shared recordings (`worker`), its first cassette (None: it records nothing), the label its lines begin with, and
    who to tell its URL once it serves (the supervisor, which announces the proxy once every worker does)."""

    worker: Worker
    cassette: Path | None
    who: str
    serving: Callable[[str], None]


@dataclass(frozen=True)
class Served:
    """What one proxy process did, for its exit status (and a supervisor's summary)."""

    exchanges: int = 0
    errors: int = 0
    lost: int = 0  # forwarded but not recorded
    upload_failures: int = 0
    bad_requests: int = 0
    slow_clients: int = 0

    @property
    def status(self) -> int:
        return 1 if self.lost or self.upload_failures else 0


def prepare(options: ServiceOptions) -> None:
    """Before serving, with `--cassettes URL`: upload what a killed proxy closed but left, fetch what replay needs."""
    chosen = modes.get(options.mode)
    if options.remote is not None:
        if chosen.records:
            # Cassettes a killed proxy closed but did not upload go first, verified, before new ones are written.
            for line in upload_leftovers(options.cassettes, options.remote):
                print(line, flush=True)
        if chosen.replays:
            # Replay needs the recordings at hand: fetched into the spool (written locally, like any cassette).
            fetch_all(options.remote, options.cassettes)


def run(options: ServiceOptions) -> int:
    """Serve until stopped; the exit status: 1 if an exchange was forwarded but not recorded, or an upload failed."""
    prepare(options)
    return asyncio.run(serve(options)).status


async def serve(options: ServiceOptions, seat: Seat | None = None) -> Served:
    """Serve until stopped (SIGINT or SIGTERM; a second one, or for a worker SIGUSR1, cuts what is in flight)."""
    proxy = await _start(options, seat)
    # What is loaded by now lives as long as the process: frozen, it is out of the collector's sight, and a full
    # collection scans only what the exchanges allocated instead of ~36k startup objects as well (a ~20-30 ms stall
    # of the forwarding loop each time, measured under the 256-stream benchmark).
    gc.freeze()
    who = seat.who if seat is not None else WHO
    stop = _stop_on_signals(proxy, who, worker=seat is not None)
    uploads = Uploads(options.remote, who)
    rotator = None
    if options.rotating and proxy.cassette_path is not None:
        rotator = Rotator(proxy, size=options.rotate_size, every=options.rotate_every, on_closed=uploads.closed)
        rotator.start()
    if seat is None:
        _say_started(proxy, options)
    else:
        seat.serving(proxy.url)
    try:
        await stop.wait()
        if proxy.in_flight:
            say(f"stopping; {proxy.in_flight} exchange(s) in flight get up to {options.grace:g} s", err=True, who=who)
    finally:
        if rotator is not None:
            await rotator.stop()
        await proxy.close(interrupted=True, grace=options.grace)
    _say_stopped(proxy, who)
    if proxy.cassette_path is not None and proxy.cassette_path.exists():
        # The local copy is removed only once the object is verified; a failed upload leaves it for a later try.
        await uploads.last(proxy.cassette_path)
    s = proxy.stats
    return Served(s.exchanges, s.errors, s.lost, uploads.failures, s.bad_requests, s.slow_clients)


async def _start(options: ServiceOptions, seat: Seat | None) -> RunningProxy:
    first = seat.cassette if seat is not None else None
    chosen = modes.get(options.mode)
    if options.rotating and chosen.records:
        # Numbered from the first: the names of a rotating series sort in recording order.
        first = rotation_first_path(first or new_cassette_path(options.cassettes, prefix=chosen.cassette_prefix))
    return await start_proxy(
        upstream=options.upstream,
        cassettes=options.cassettes,
        mode=options.mode,
        host=options.host,
        port=options.port,
        pace=options.pace,
        upstream_key=options.upstream_key,
        client_token=options.client_token,
        request_timeout=options.request_timeout,
        idle_timeout=options.idle_timeout,
        redactor=options.redactor,
        limits=options.limits,
        match=options.match,
        cassette=first,
        worker=seat.worker if seat is not None else None,
    )


def _stop_on_signals(proxy: RunningProxy, who: str, *, worker: bool) -> asyncio.Event:
    """An event set by SIGINT or SIGTERM; a second one also ends the shutdown's grace at once. A worker stops on the
    first and ignores the others (a Ctrl-C reaches every process of the terminal's group, and a service manager may
    signal each process as well as the supervisor): only its supervisor's SIGUSR1 cuts what is in flight."""
    stop = asyncio.Event()

    def on_signal(signame: str) -> None:
        if stop.is_set() and not worker:
            say(f"{signame} again: cutting in-flight exchanges now", err=True, who=who)
            proxy.hurry()
        stop.set()

    def on_hurry() -> None:
        proxy.hurry()
        stop.set()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig.name)
    if worker:
        loop.add_signal_handler(signal.SIGUSR1, on_hurry)
    return stop


class Uploads:
    """Each closed cassette to `remote` (None: kept where it is, said so), verified; `failures` counts those that
    failed (their local copy stays, for a later try)."""

    def __init__(self, remote: str | None, who: str = WHO) -> None:
        self.remote = remote
        self.who = who
        self.failures = 0

    async def closed(self, path: Path) -> None:
        """A rotation closed `path`."""
        if self.remote is None:
            say(f"closed {path}", who=self.who)
            return
        url = await self._upload(path)
        if url is not None:
            say(f"closed {path}, uploaded {url} (size and sha256 verified)", who=self.who)

    async def last(self, path: Path) -> None:
        """The proxy closed its last cassette, `path`."""
        if self.remote is not None:
            url = await self._upload(path)
            if url is not None:
                say(f"uploaded {url} (size and sha256 verified), removed the local copy", who=self.who)

    async def _upload(self, path: Path) -> str | None:
        assert self.remote is not None
        try:
            return await asyncio.to_thread(upload, path, self.remote)
        except BenchError as exc:
            self.failures += 1
            say(f"error: {exc}", err=True, who=self.who)
            return None


def _say_started(proxy: RunningProxy, options: ServiceOptions) -> None:
    say(f"listening on {proxy.url} (clients: base URL {proxy.url}/v1)")
    # The label, not the flag: an upstream URL given with user:password@ or ?key= must not be printed with them.
    shown = public_url(options.upstream)[1] if options.upstream else "(none: replay only)"
    say(f"upstream {shown}, mode {options.mode}")
    if proxy.cassette_path is not None:
        then = f" (uploaded to {options.remote} when closed)" if options.remote else ""
        say(f"writing {proxy.cassette_path}{then}")
    else:
        say("passthrough, recording nothing")


def _say_stopped(proxy: RunningProxy, who: str) -> None:
    s = proxy.stats
    where = f" to {proxy.cassette_path}" if proxy.cassette_path else ""
    refused = ""
    if s.bad_requests or s.slow_clients:
        refused = f", {s.bad_requests} bad request(s) refused, {s.slow_clients} slow connection(s) closed"
    say(f"stopped; {s.exchanges} exchange(s) recorded{where}, {s.errors} upstream error(s){refused}", who=who)
    if s.lost:
        why = proxy.recording_failure or "the cassette writer failed"
        say(f"error: {s.lost} exchange(s) forwarded but NOT recorded ({why})", err=True, who=who)


def say(line: str, *, err: bool = False, who: str = WHO) -> None:
    """One status line, at once (a supervisor reading the pipe sees it as it happens)."""
    print(f"{who}: {line}", file=sys.stderr if err else sys.stdout, flush=True)
