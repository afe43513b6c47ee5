"""The proxy's aiohttp server: one handler for every path, that authenticates, then replays, forwards or answers a miss.

A low-level `web.Server`, not a `web.Application`: with one route and no middleware the proxy needs no router, and
owning the connection's protocol lets it time each request from the socket read that completed the request's head.
aiohttp parses that read, wakes the connection's task, builds the request and starts the handler in a new task, which
took 0.2 ms on a 2-core machine: time the client has already waited, so it belongs inside the recorded times.

The connection also bounds how long a client may take (`ClientLimits`): aiohttp has no limit on a request head that
trickles in, and keeps an idle connection for an hour by default, so slow or silent clients would hold sockets and
file descriptors without bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from time import monotonic_ns

from aiohttp import HttpVersion11, web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong
from aiohttp.http_parser import RawRequestMessage
from aiohttp.streams import StreamReader

from bench.core.cassette.format import CLIENT_DISCONNECTED
from bench.core.cassette.records import Request
from bench.core.cassette.redact import describe_bad_request
from bench.core.fingerprint import fingerprint
from bench.proxy.error_responses import (
    bad_request,
    body_timeout,
    error_response,
    internal_error,
    parse_problem,
    raw_error,
    shutting_down,
    too_large,
    unauthorized,
)
from bench.proxy.forward import TAG_PREFIX
from bench.proxy.modes import Mode
from bench.proxy.recorder import Exchange
from bench.proxy.sink import Recording
from bench.proxy.starts import StartSlices
from bench.proxy.state import Flights, ProxyStats

log = logging.getLogger("bench.proxy")

# Request bodies are read whole (they are fingerprinted and recorded); chat requests with images can be large.
MAX_REQUEST_BODY = 256 << 20
# A connection closed with a last response (a 408) first ends its sending side and drops what the client still sends
# for this long: closing a socket with unread bytes sends a reset, which can destroy the response before the client
# has read it (a trickling client always has a byte in flight).
LINGER = 2.0


@dataclass(frozen=True)
class ClientLimits:
    """How long a client may take, in seconds (None: no limit). nginx's defaults: 60 s for a request head or body,
    75 s for an idle kept-alive connection."""

    header_timeout: float | None = 60.0  # from the connection's opening, or the first byte of a later request
    keepalive_timeout: float | None = 75.0  # an idle connection between requests
    body_timeout: float | None = 60.0  # the whole request body, from its head


def _authorized(request: web.BaseRequest, token: str) -> bool:
    presented = request.headers.get("Authorization", "")
    scheme, _, value = presented.partition(" ")
    if scheme.lower() != "bearer":
        value = request.headers.get("api-key", "")
    return hmac.compare_digest(value.strip().encode(), token.encode())


class ArrivalStamps(web.RequestHandler):
    """An HTTP connection that notes when each read reached it, before aiohttp parses the bytes, and closes itself
    when a request head is not complete within the header timeout."""

    __slots__ = ("head_since", "head_timer", "last_read", "proxy", "request_arrived")

    def __init__(self, server: ProxyServer) -> None:
        # No access log (a line per request costs more than forwarding it); None is how aiohttp's runners say so.
        # aiohttp closes a kept-alive connection at once with 0: "no limit" is a year.
        keepalive = server.limits.keepalive_timeout or 365 * 86400.0
        super().__init__(
            server,
            loop=asyncio.get_running_loop(),
            access_log=None,  # type: ignore[arg-type]
            keepalive_timeout=keepalive,
        )
        self.proxy = server
        self.last_read = 0
        self.request_arrived = 0
        self.head_since = 0  # when the request head now awaited began (0: none awaited)
        self.head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.head_since = monotonic_ns()
        self._arm_head_timer()

    def data_received(self, data: bytes) -> None:
        self.last_read = monotonic_ns()
        # aiohttp's waiter exists only while the connection waits for a request between two others: this read
        # begins the next request's head.
        if not self.head_since and self._waiter is not None:
            self.head_since = self.last_read
            if self.head_timer is None:
                self._arm_head_timer()
        super().data_received(data)

    def connection_lost(self, exc: BaseException | None) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None
        super().connection_lost(exc)

    def _process_keepalive(self) -> None:
        # aiohttp's keep-alive bound closes a connection waiting for a request even while its head comes in, and from
        # the connection's opening: those are the header timeout's, so it applies only to a connection left idle
        # after a response with no byte of a next request.
        if self.head_since:
            self._keepalive_handle = None
            return
        super()._process_keepalive()

    def _arm_head_timer(self) -> None:
        timeout = self.proxy.limits.header_timeout
        if timeout:
            self.head_timer = self._loop.call_later(timeout, self._check_head)

    def _check_head(self) -> None:
        """One timer per connection, re-armed only when it fires: no cost per request."""
        self.head_timer = None
        since = self.head_since
        timeout = self.proxy.limits.header_timeout
        if not since or not timeout or self.transport is None:
            return  # no head awaited: the next one's first read arms the timer again
        left = since + int(timeout * 1e9) - monotonic_ns()
        if left > 0:
            self.head_timer = self._loop.call_later(left / 1e9, self._check_head)
            return
        waiter = self._waiter
        if waiter is None or waiter.done():
            return  # the head is complete: its request is being handled
        self.proxy.stats.slow_clients += 1
        log.info("bench proxy: closed a connection from %s: no whole request head in %g s", self._peer(), timeout)
        if self.last_read < since:
            self.force_close()  # nothing came: nothing to answer
            return
        # Part of a head came: tell the client why, as nginx does.
        message = f"bench proxy: request head not complete within {timeout:g} s (--header-timeout)"
        self.transport.write(
            raw_error(408, "Request Timeout", message, type="invalid_request_error", code="request_timeout")
        )
        self.linger()

    def linger(self) -> None:
        """End the connection after what was written: FIN now, drop what the client still sends, close after LINGER
        seconds (or when the client closes)."""
        transport = self.transport
        if transport is None:
            return
        self._close = True  # aiohttp's flag: data_received drops every later read (close() would close at once)
        if transport.can_write_eof():
            transport.write_eof()
        self._loop.call_later(LINGER, self.force_close)

    def _peer(self) -> str:
        peer = self.peername
        return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)

    def handle_error(
        self, request: web.BaseRequest, status: int = 500, exc: BaseException | None = None, message: str | None = None
    ) -> web.StreamResponse:
        """aiohttp's answer to a request it could not parse (or a handler's crash), OpenAI-shaped; a malformed request
        is the client's fault, so one log line, and never the bytes the parser quotes (they can hold a key)."""
        if request.writer.output_size > 0:
            raise ConnectionError("the response has begun; cannot send an error instead")
        if status >= 500:
            # A bug of the proxy's: the traceback is what it takes to fix it.
            log.error("bench proxy: %d for %s %s", status, request.method, request.path, exc_info=exc)
            return internal_error(status)
        if isinstance(exc, LineTooLong):
            problem = f"a request line or header longer than {exc.args[1]} bytes"
        elif isinstance(exc, HttpProcessingError):
            problem = describe_bad_request(exc.message)
        else:
            problem = parse_problem(message or str(exc or "unreadable request"))
        self.proxy.stats.bad_requests += 1
        log.warning("bench proxy: %d for a malformed request from %s: %s", status, self._peer(), problem)
        return bad_request(problem, status)


class ProxyServer(web.Server):
    """aiohttp's low-level server with `ArrivalStamps` connections."""

    def __init__(
        self,
        handler: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]],
        limits: ClientLimits,
        stats: ProxyStats,
    ) -> None:
        super().__init__(handler, request_factory=_make_request, handler_cancellation=True)
        self.limits = limits
        self.stats = stats  # where its connections count slow clients and malformed requests

    def __call__(self) -> ArrivalStamps:
        return ArrivalStamps(self)


def _make_request(
    message: RawRequestMessage,
    payload: StreamReader,
    protocol: web.RequestHandler,
    writer: AbstractStreamWriter,
    task: asyncio.Task[None],
) -> web.BaseRequest:
    # aiohttp calls this as soon as the connection's task wakes for a parsed head: before it handles any later read
    # (the body, say), so the last read is the one that completed this head. A request that queued behind another
    # on its connection (pipelining) is timed from a later read, never later than its handler's start.
    if isinstance(protocol, ArrivalStamps):
        protocol.request_arrived = protocol.last_read
        protocol.head_since = 0
    loop = asyncio.get_running_loop()
    return web.BaseRequest(message, payload, protocol, writer, task, loop, client_max_size=MAX_REQUEST_BODY)


def _arrival(request: web.BaseRequest) -> int:
    protocol = request.protocol
    return protocol.request_arrived if isinstance(protocol, ArrivalStamps) else monotonic_ns()


async def _answer_expect(request: web.BaseRequest) -> web.Response | None:
    """`Expect: 100-continue` (curl sends it for bodies over 1 KiB): tell the client to send its body now, or it
    waits a second before it does. A bare server leaves this to its handler."""
    expect = request.headers.get("Expect")
    if expect is None or request.version != HttpVersion11:
        return None
    if expect.strip().lower() != "100-continue":
        return error_response(417, f"cannot meet Expect: {expect}", type="invalid_request_error", code="bad_expect")
    await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    return None


def _target_problem(request: web.BaseRequest) -> str | None:
    """Why the request target is not a path on this server (origin-form, RFC 9112 3.2), else None. bench proxy is a
    reverse proxy: a client that uses it as a forward proxy (a full URL, CONNECT, `OPTIONS *`) gets a 400. The target
    itself is never repeated: an absolute URL can carry credentials."""
    if request.method == "CONNECT":
        return "CONNECT (tunnelling) is not served"
    target = request.raw_path
    if target == "*":
        return "the asterisk-form target `*` is not served"
    if not target.startswith("/"):
        return "the request target is a full URL (a forward proxy's form), not a path"
    return None


class Handler:
    """The proxy's one request handler: admits a request (its turn to start, the proxy's token, the body's size and
    time), begins its exchange, has the mode answer it and ends the exchange, whatever happens. What it holds is what
    that takes: the mode, the exchanges in flight, where they are recorded, the counters and the client limits."""

    def __init__(
        self,
        mode: Mode,
        flights: Flights,
        recording: Recording,
        stats: ProxyStats,
        limits: ClientLimits | None = None,
        client_token: str | None = None,
        *,
        upstream_label: str | None = None,
    ) -> None:
        self.mode = mode
        self.flights = flights
        self.recording = recording
        self.stats = stats
        self.limits = limits or ClientLimits()
        self.client_token = client_token
        self.upstream_label = upstream_label  # recorded with each exchange
        self.starts = StartSlices()  # request starts spread over loop iterations
        self.fingerprint_first = mode.replays  # replay needs the fingerprint at once; recording computes it later

    async def __call__(self, request: web.BaseRequest) -> web.StreamResponse:
        problem = _target_problem(request)
        if problem is not None:
            self.stats.bad_requests += 1
            log.warning("bench proxy: 400 for %s: %s", request.method, problem)
            return bad_request(f"{problem}; bench proxy is a reverse proxy: send requests to its base URL (.../v1/...)")
        if not await self._turn(request):
            return shutting_down()
        refused = await self._admit(request)
        if refused is not None:
            return refused
        read = await self._read_body(request)
        if isinstance(read, web.Response):
            return read
        ex = self._exchange(request, read)
        task = asyncio.current_task()
        assert task is not None
        self.flights.begin(ex, task)
        try:
            return await self.mode.respond(request, ex)
        except asyncio.CancelledError:
            why = "the proxy shut down before the exchange finished" if self.flights.closing else "the client went away"
            ex.fail(CLIENT_DISCONNECTED, why)
            raise
        finally:
            self._end(ex)

    async def _turn(self, request: web.BaseRequest) -> bool:
        """Wait for the request's turn to start; False if the proxy is closing by then."""
        # A burst of requests starts a slice of the loop at a time (bench.proxy.starts); the wait is inside the
        # recorded times, which run from the request's arrival.
        turn = self.starts.turn()
        early = b""
        size = request.content_length
        if turn is not None and size is not None and size <= MAX_REQUEST_BODY and request.content.is_eof():
            # Here whole (no wait; `read` keeps it for later): the record has it if its client leaves while it waits.
            early = await request.read()
        try:
            while turn is not None:
                await turn
                turn = self.starts.resume()
        except asyncio.CancelledError:
            self._left_waiting(request, early)
            raise
        return not self.flights.closing

    async def _admit(self, request: web.BaseRequest) -> web.Response | None:
        """The proxy's refusal of a request it will not take (no token, too large, an Expect it cannot meet)."""
        if self.client_token is not None and not _authorized(request, self.client_token):
            self.stats.rejected += 1
            return unauthorized()
        size = request.content_length
        if size is not None and size > MAX_REQUEST_BODY:
            self.stats.bad_requests += 1
            log.warning("bench proxy: 413 for %s %s: body of %d bytes", request.method, request.path, size)
            return too_large(size, MAX_REQUEST_BODY)
        return await _answer_expect(request)

    async def _read_body(self, request: web.BaseRequest) -> bytes | web.Response:
        """The whole body, or the proxy's 408/413 for a body that trickles in or is too large."""
        limits = self.limits
        try:
            if request.content.is_eof():
                return await request.read()  # came with its head, as nearly every body does: no timer
            async with asyncio.timeout(limits.body_timeout):
                return await request.read()
        except web.HTTPRequestEntityTooLarge:
            refused = too_large(None, MAX_REQUEST_BODY)
            why = f"body over {MAX_REQUEST_BODY >> 20} MiB"
        except TimeoutError:
            assert limits.body_timeout is not None
            refused = body_timeout(limits.body_timeout)
            why = f"body not received within {limits.body_timeout:g} s"
            # Answer and end the connection now: aiohttp would read the rest of the trickle for 10 s more first.
            with contextlib.suppress(ConnectionError):
                await refused.prepare(request)
                await refused.write_eof()
            if isinstance(request.protocol, ArrivalStamps):
                request.protocol.linger()
        self.stats.bad_requests += 1
        log.warning("bench proxy: %d for %s %s: %s", refused.status, request.method, request.path, why)
        return refused

    def _exchange(self, request: web.BaseRequest, body: bytes) -> Exchange:
        t0 = _arrival(request)
        path, _, query = request.raw_path.partition("?")
        headers = [[str(k), v] for k, v in request.headers.items()]  # str: a record holds plain strings, not istr
        tags = {k[len(TAG_PREFIX) :].lower(): v for k, v in headers if k.lower().startswith(TAG_PREFIX)}
        fp = fingerprint(request.method, path, query, body) if self.fingerprint_first else ""
        return Exchange(
            t0=t0,
            started_us=time.time_ns() // 1000 - (monotonic_ns() - t0) // 1000,
            mode=self.mode.recorded_as,
            request=Request(method=request.method, path=path, query=query, headers=headers, body=body, fp=fp),
            tags=tags,
            upstream_url=self.upstream_label,
        )

    def _end(self, ex: Exchange) -> None:
        """The exchange is over: out of the flights, counted, queued for its record unless it is written already."""
        self.flights.end(ex)
        if ex.outcome == CLIENT_DISCONNECTED:
            self.stats.client_disconnects += 1
        self.recording.finish(ex)

    def _left_waiting(self, request: web.BaseRequest, body: bytes) -> None:
        """A request cancelled while its start waited its turn (its client left, or the proxy shut down): recorded and
        counted like one cancelled later, with the body it came with (none if that had not all arrived). Not a client
        without the proxy's token: its request would have been refused unrecorded."""
        if self.client_token is not None and not _authorized(request, self.client_token):
            return
        ex = self._exchange(request, body)
        if self.flights.closing:
            ex.fail(CLIENT_DISCONNECTED, "the proxy shut down before the exchange started")
        else:
            ex.fail(CLIENT_DISCONNECTED, "the client went away while its request waited to start")
        task = asyncio.current_task()
        assert task is not None
        self.flights.begin(ex, task)
        self._end(ex)


def serve_with(
    handler: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]], limits: ClientLimits, stats: ProxyStats
) -> ProxyServer:
    """A proxy server around any handler that ends in a `Handler` (the pytest plugin keeps one address for a whole run
    and hands each request to the current test's proxy)."""
    return ProxyServer(handler, limits, stats)
