"""`bench proxy --workers N`: N processes serve one port, each recording into its own shard of one run.

The supervisor (this process) loads what every worker needs once (the recordings, for replay and auto), opens one
listening socket per worker in the port's SO_REUSEPORT group, and forks the workers; then it only relays signals and
waits. Each worker is a whole `bench proxy` (bench.proxy.standalone.serve) on its own socket, with its own cassette
(`<run>-w<K>.cassette`, header `shard`), rotation and uploads.

Why SO_REUSEPORT and not one socket shared by all: the kernel spreads connections over the group by a hash of their
addresses, so a burst of 256 connections lands within a few percent of even (122-134 of 256 over two workers in five
bursts), where workers accepting from one shared socket took 58-198 (asyncio accepts up to 100 connections per
wake-up, so whichever worker wakes first takes most of a burst; docs/measurements/2026-12-03-workers.md).

Stopping: SIGINT or SIGTERM to the supervisor is passed on to every worker, which stops as one process does (grace,
then its cassette closed); a second one sends SIGUSR1, on which the workers cut what is in flight. A worker ignores
repeated stop signals of its own (Ctrl-C reaches every process of the terminal's group; a service manager may signal
each process). A worker whose supervisor dies (kill -9) gets SIGTERM from the kernel (PR_SET_PDEATHSIG) and stops
cleanly. A worker that dies is said so; the others go on serving, and the exit status is 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import multiprocessing
import os
import signal
import socket
import sys
from multiprocessing.connection import Connection, wait
from pathlib import Path
from types import FrameType

import msgspec

from bench.core.cassette import new_cassette_path
from bench.core.cassette.format import SUFFIX
from bench.core.cassette.records import Shard
from bench.core.errors import BenchError
from bench.core.serving import LISTEN_BACKLOG, address_of, cannot_listen
from bench.proxy import modes
from bench.proxy.matching import MatchOptions
from bench.proxy.recordings import ReplayIndex
from bench.proxy.server import Worker, public_url
from bench.proxy.standalone import Seat, Served, ServiceOptions, prepare, say, serve

PR_SET_PDEATHSIG = 1


def cores() -> int:
    """`--workers auto`: the cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def worker_sockets(host: str, port: int, n: int) -> list[socket.socket]:
    """`n` sockets listening on host:port in one SO_REUSEPORT group (port 0: the first picks a free port); a port in
    use or a host this machine does not have is one line naming it and the fix."""
    family, kind, proto, address = address_of(host, port)
    socks: list[socket.socket] = []
    try:
        for _ in range(n):
            sock = socket.socket(family, kind, proto)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind(address if len(socks) == 1 else (address[0], socks[0].getsockname()[1], *address[2:]))
            sock.listen(LISTEN_BACKLOG)
            sock.setblocking(False)
    except OSError as exc:
        for sock in socks:
            sock.close()
        raise cannot_listen(host, port, exc) from None
    return socks


def shard_paths(folder: Path, prefix: str, n: int) -> tuple[str, list[Path]]:
    """The run's name and its shards' first cassettes, `<run>-w<K>.cassette`, none of which exists yet."""
    while True:
        run = new_cassette_path(folder, prefix=prefix).name.removesuffix(SUFFIX)
        paths = [folder / f"{run}-w{k}{SUFFIX}" for k in range(n)]
        if not any(p.exists() for p in paths):
            return run, paths


class Report(msgspec.Struct):
    """What a worker tells its supervisor: its URL once it serves, or why it could not start; then what it did."""

    url: str | None = None
    error: str | None = None
    served: Served | None = None


_REPORT = msgspec.msgpack.Decoder(Report)


def run(options: ServiceOptions) -> int:
    """Serve with `options.workers` processes until stopped; the exit status (1: an exchange forwarded but not
    recorded, an upload failed, or a worker died)."""
    prepare(options)
    chosen = modes.get(options.mode)
    index = None
    if chosen.replays:
        index = ReplayIndex.load(options.cassettes, options.match or MatchOptions())
        chosen.check(index, options.cassettes)
        index.share()
    if options.upstream is not None:
        public_url(options.upstream)  # a bad URL is one line here, not one per worker
    socks = worker_sockets(options.host, options.port, options.workers)
    run_name, paths = "", list[Path | None]([None] * options.workers)
    if chosen.records:
        run_name, shard_files = shard_paths(options.cassettes, chosen.cassette_prefix, options.workers)
        paths = list[Path | None](shard_files)
    # The recordings loaded above are shared with the workers copy-on-write: frozen, the collector never writes to
    # their pages in any process.
    gc.freeze()
    context = multiprocessing.get_context("fork")
    workers: list[tuple[multiprocessing.process.BaseProcess, Connection]] = []
    for k, (sock, path) in enumerate(zip(socks, paths, strict=True)):
        mine, theirs = context.Pipe(duplex=False)
        seat = Worker(sock, Shard(run=run_name, index=k, count=options.workers), index)
        proc = context.Process(
            target=_worker, args=(options, seat, path, socks, theirs, os.getpid()), name=f"bench proxy worker {k}"
        )
        proc.start()
        theirs.close()
        workers.append((proc, mine))
    for sock in socks:
        sock.close()
    return Supervisor(options, workers, paths, run_name).run()


class Supervisor:
    """Waits for the workers: announces the proxy once all serve, passes signals on, sums up what they did."""

    def __init__(
        self,
        options: ServiceOptions,
        workers: list[tuple[multiprocessing.process.BaseProcess, Connection]],
        paths: list[Path | None],
        run_name: str,
    ) -> None:
        self.options = options
        self.workers = workers
        self.paths = paths
        self.run_name = run_name
        self.signals = 0
        self.served: dict[int, Served] = {}
        self.died: list[str] = []

    def run(self) -> int:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._on_signal)
        urls = self._started()
        if urls is None:
            self._stop_all(signal.SIGTERM)
            self._wait()
            return 1
        self._say_started(urls[0])
        self._wait()
        return self._say_stopped()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.signals += 1
        if self.signals == 2:
            say("stop signal again: cutting in-flight exchanges now", err=True)
        self._stop_all(signal.SIGTERM if self.signals == 1 else signal.SIGUSR1)

    def _stop_all(self, sig: int) -> None:
        for proc, _ in self.workers:
            if proc.pid is not None and proc.exitcode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, sig)

    def _started(self) -> list[str] | None:
        """Each worker's URL once all serve; None (said why) if one could not start."""
        urls: list[str] = []
        for k, (_proc, conn) in enumerate(self.workers):
            report = self._receive(conn)
            if report is None or report.url is None:
                why = report.error if report is not None and report.error else f"worker {k} exited at start"
                print(f"bench: error: {why}", file=sys.stderr, flush=True)
                return None
            urls.append(report.url)
        return urls

    def _receive(self, conn: Connection) -> Report | None:
        while True:
            try:
                return _REPORT.decode(conn.recv_bytes())
            except EOFError:
                return None
            except InterruptedError:
                continue

    def _wait(self) -> None:
        pending = {conn: (k, proc) for k, (proc, conn) in enumerate(self.workers)}
        while pending:
            for conn in wait(list(pending)):
                k, proc = pending.pop(conn)  # type: ignore[call-overload]
                report = self._receive(conn)  # type: ignore[arg-type]
                proc.join()
                if report is not None and report.served is not None:
                    self.served[k] = report.served
                elif self.signals == 0 or proc.exitcode != 0:
                    self.died.append(f"worker {k} exited (status {proc.exitcode})")
                    say(f"error: worker {k} exited (status {proc.exitcode}); the others go on serving", err=True)

    def _say_started(self, url: str) -> None:
        options = self.options
        say(f"listening on {url} (clients: base URL {url}/v1), {len(self.workers)} workers")
        shown = public_url(options.upstream)[1] if options.upstream else "(none: replay only)"
        say(f"upstream {shown}, mode {options.mode}")
        written = [str(p) for p in self.paths if p is not None]
        if written:
            then = f" (uploaded to {options.remote} when closed)" if options.remote else ""
            say(f"writing {', '.join(written)}: run {self.run_name}, a shard per worker{then}")
        else:
            say("passthrough, recording nothing")

    def _say_stopped(self) -> int:
        s = self.served.values()
        total = sum(x.exchanges for x in s)
        say(
            f"stopped; {total} exchange(s) recorded by {len(self.workers)} workers"
            + (f" in run {self.run_name}" if self.run_name else "")
            + f", {sum(x.errors for x in s)} upstream error(s)"
        )
        failed = any(x.status for x in s) or bool(self.died)
        return 1 if failed else 0


def _worker(
    options: ServiceOptions,
    seat: Worker,
    cassette: Path | None,
    socks: list[socket.socket],
    conn: Connection,
    supervisor: int,
) -> None:
    """A worker process: serves until stopped, then tells the supervisor what it did."""
    _die_with(supervisor)
    for sock in socks:
        if sock is not seat.sock:
            sock.close()
    # The supervisor's handlers came with the fork: until the worker's loop installs its own, stop signals are
    # left to it (the supervisor passes them on), never a KeyboardInterrupt mid-start.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    who = f"bench proxy [worker {seat.shard.index}]"

    def serving(url: str) -> None:
        conn.send_bytes(msgspec.msgpack.encode(Report(url=url)))

    try:
        served = asyncio.run(serve(options, Seat(seat, cassette, who, serving)))
    except BenchError as exc:
        conn.send_bytes(msgspec.msgpack.encode(Report(error=str(exc))))
        sys.exit(1)
    conn.send_bytes(msgspec.msgpack.encode(Report(served=served)))
    sys.exit(served.status)


def _die_with(supervisor: int) -> None:
    """SIGTERM from the kernel when the supervisor dies (Linux): the worker then stops and closes its cassette."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != supervisor:  # it died before the request was made
        os.kill(os.getpid(), signal.SIGTERM)
