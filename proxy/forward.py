"""Answering from the upstream: `Upstream.forward` sends a request on and streams its answer back, recording it.

One client write per upstream read, bytes untouched (the upstream session has `auto_decompress=False`), so the
client sees the upstream's own chunking and timing (docs/proxy.md: merging reads makes ITLs read ~0). The loop uses
`readany()` directly: an async generator per response would cost more per chunk for nothing.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from time import monotonic_ns

import aiohttp
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from bench.core.cassette.format import CLIENT_DISCONNECTED, TIMEOUT, UPSTREAM_ERROR
from bench.core.cassette.records import Response
from bench.proxy.downstream import HOP_BY_HOP, abort_client, client_headers, end_whole, uncancel
from bench.proxy.error_responses import JSON_TYPE, error_body
from bench.proxy.parts import hold_no_more
from bench.proxy.recorder import Exchange
from bench.proxy.recordings import sent_done
from bench.proxy.sink import Recording
from bench.proxy.state import Flights, ProxyStats
from bench.proxy.watchdog import IdleSweep, Watch

# Recomputed or set by aiohttp for the new connection; Expect is answered by the proxy itself.
NOT_FORWARDED = HOP_BY_HOP | {"host", "content-length", "expect"}
TAG_PREFIX = "x-bench-"
PROXY_ERROR_HEADER = "X-Bench-Proxy-Error"
# The tag (header X-Bench-Idle-Timeout) a client sends with its own limit on a silent stream, in seconds: a client
# that leaves once the upstream has been silent that long gave up for a timeout, and is recorded so (timeout), not as
# a client that went away (bench record's driver sends it).
IDLE_TAG = "idle-timeout"

# aiohttp would otherwise add its own Accept, Accept-Encoding, User-Agent and Content-Type: the upstream must see the
# client's headers, not the proxy's. Set on the upstream session (bench.proxy.server).
SKIP_AUTO_HEADERS = frozenset({"Accept", "Accept-Encoding", "User-Agent", "Content-Type"})

# How long a client's departure waits for the upstream's end of body before it counts as leaving mid-response: the
# end follows the last event at once when the answer is whole; a stream that still has events sends the next one.
END_GRACE = 0.5


def _connection_listed(headers: CIMultiDictProxy[str]) -> set[str]:
    listed: set[str] = set()
    for value in headers.getall("Connection", ()):
        listed.update(token.strip().lower() for token in value.split(","))
    return listed


@dataclass(frozen=True)
class Credentials:
    """The key sent upstream instead of the client's (`upstream_key`), the token clients must send the proxy
    (`client_token`: never passed on), and the headers never recorded (`secret_headers`)."""

    upstream_key: str | None = None
    client_token: str | None = None
    secret_headers: frozenset[str] = frozenset()


class Upstream:
    """Where a forwarding proxy sends requests (`url`, through one shared `session`), with which `credentials`,
    within which silence limit (`idle`), and where it records what comes back (`recording`); the exchanges in flight
    (`flights`) say whether a cancelled one is being cut off by the shutdown."""

    def __init__(
        self,
        url: URL,
        label: str,
        session: aiohttp.ClientSession,
        credentials: Credentials,
        recording: Recording,
        flights: Flights,
        stats: ProxyStats,
        idle: IdleSweep | None = None,
    ) -> None:
        self.label = label  # the URL without credentials, as recorded and shown
        self.session = session
        self.credentials = credentials
        self.recording = recording
        self.flights = flights
        self.stats = stats
        self.idle = idle
        self._origin = str(url.origin())
        self._base_path = url.raw_path.rstrip("/")

    def target(self, path: str, query: str) -> URL:
        """The upstream URL for a request path: the upstream's base path is prepended unless already there."""
        base = self._base_path
        if base and not (path == base or path.startswith(base + "/")):
            path = base + path
        return URL(self._origin + path + (f"?{query}" if query else ""), encoded=True)

    def headers(self, request: web.BaseRequest) -> CIMultiDict[str]:
        """The request's headers as the upstream gets them: no hop-by-hop or tag headers, never the proxy's token."""
        drop = NOT_FORWARDED | _connection_listed(request.headers) if "Connection" in request.headers else NOT_FORWARDED
        out: CIMultiDict[str] = CIMultiDict()
        for name, value in request.headers.items():
            low = name.lower()
            if low in drop or low.startswith(TAG_PREFIX):
                continue
            out.add(name, value)
        key, token = self.credentials.upstream_key, self.credentials.client_token
        if key is not None or token is not None:
            # The client's Authorization held the proxy's token (or the upstream key replaces it): never pass it on.
            out.popall("Authorization", None)
            if token is not None and out.get("api-key", "").strip() == token:
                del out["api-key"]
            if key is not None:
                out["Authorization"] = f"Bearer {key}"
        return out

    async def forward(self, request: web.BaseRequest, ex: Exchange) -> web.StreamResponse:
        """Send the request on, stream the answer back read by read, record it; a failed upstream gets its client
        the proxy's 502/504."""
        url = self.target(ex.request.path, ex.request.query)
        headers = self.headers(request)
        task = asyncio.current_task()
        assert task is not None
        watchdog = self.idle.watch(ex, task) if self.idle is not None else None
        try:
            upstream = await self._send(ex, url, headers, watchdog)
            if isinstance(upstream, web.Response):
                return upstream
            return await self._relay(request, upstream, ex, watchdog)
        finally:
            if watchdog is not None:
                watchdog.stop()

    async def _send(
        self, ex: Exchange, url: URL, headers: CIMultiDict[str], watchdog: Watch | None
    ) -> aiohttp.ClientResponse | web.Response:
        """The upstream's response (its head), or the proxy's own answer when the upstream failed."""
        ex.sent(monotonic_ns())
        request = ex.request
        try:
            return await self.session.request(
                request.method, url, headers=headers, data=request.body or None, allow_redirects=False
            )
        except asyncio.CancelledError:
            if watchdog is None or not watchdog.absorb():
                raise
            return await self._failed(ex, 504, TIMEOUT, self._late())
        except TimeoutError:
            return await self._failed(ex, 504, TIMEOUT, self._late())
        except aiohttp.ClientError as exc:
            reason = str(exc) or type(exc).__name__
            return await self._failed(ex, 502, UPSTREAM_ERROR, f"upstream {self.label} failed: {reason}")

    def _late(self) -> str:
        return f"upstream {self.label} did not answer in time"

    async def _failed(self, ex: Exchange, status: int, outcome: str, message: str) -> web.Response:
        """The proxy's own 502/504 for a failed upstream: a whole answer for its client, so recorded before it is
        sent."""
        self.stats.errors += 1
        code = "upstream_timeout" if outcome == TIMEOUT else "bad_gateway"
        body = error_body(message, type="upstream_error", code=code)
        ex.answered_by_proxy(status, [["Content-Type", JSON_TYPE], [PROXY_ERROR_HEADER, code]], body, outcome, message)
        response = web.Response(status=status, body=body, content_type=JSON_TYPE, headers={PROXY_ERROR_HEADER: code})
        await self.recording.persist(ex)
        return response

    async def _relay(
        self, request: web.BaseRequest, upstream: aiohttp.ClientResponse, ex: Exchange, watchdog: Watch | None
    ) -> web.StreamResponse:
        """The upstream's answer to the client: its head, its body read by read, then its end (whole or cut)."""
        t = monotonic_ns()
        finished = False
        try:
            raw_headers = [[str(k), v] for k, v in upstream.headers.items()]  # str: a record holds plain strings
            streamed = upstream.headers.get("Content-Type", "").startswith("text/event-stream")
            head = Response(status=upstream.status, headers=raw_headers, streamed=streamed)
            ex.answered(head, t, self.credentials.secret_headers)
            response = web.StreamResponse(
                status=upstream.status, reason=upstream.reason, headers=client_headers(raw_headers)
            )
            await response.prepare(request)
            ex.spent(monotonic_ns() - t)
            finished = await self._pump(request, upstream, response, ex, watchdog)
            if finished:
                if watchdog is not None:
                    watchdog.pause()  # the body is read whole: what follows waits on our writer and the client only
                await end_whole(self.recording, ex, response)
            elif ex.outcome != CLIENT_DISCONNECTED:
                self.stats.errors += 1
            return response
        finally:
            # close() drops the upstream connection, which is how a client's disconnect cancels the upstream request.
            if finished:
                upstream.release()
            else:
                upstream.close()

    async def _pump(
        self,
        request: web.BaseRequest,
        upstream: aiohttp.ClientResponse,
        response: web.StreamResponse,
        ex: Exchange,
        watchdog: Watch | None,
    ) -> bool:
        """Forward the body read by read; True if it was read to its end and the client got all of it. A body past
        the spill size is written to the cassette in parts as it comes (bench.proxy.parts), between two reads."""
        content = upstream.content
        chunks = ex.chunks
        times = ex.times
        limit, compressed = self.recording.limit(ex)
        held = 0
        own = 0  # the proxy's own time forwarding reads, added to the exchange's once, when the loop ends
        try:
            while True:
                try:
                    if held >= limit:
                        if compressed:
                            chunks = _stop_holding(ex, chunks, held)
                        else:
                            held = await self._spill(ex, watchdog)
                    chunk = await content.readany()
                except asyncio.CancelledError:
                    if watchdog is not None and watchdog.absorb():
                        return _cut(request, ex, TIMEOUT, "upstream went silent longer than the idle timeout mid-body")
                    # A client can leave after `proxy.close()` began (its last answer whole): only the shutdown's own
                    # cut after the grace, or a cancellation with the client still there, ends the exchange here.
                    if self.flights.cutting_off or request.transport is not None:
                        raise
                    if not await _client_had_it_all(upstream, ex, chunks, times):
                        return False
                    chunk = b""
                except TimeoutError:
                    return _cut(request, ex, TIMEOUT, "upstream took longer than the request timeout")
                except aiohttp.ClientError as exc:
                    return _cut(
                        request, ex, UPSTREAM_ERROR, f"upstream broke the body off: {exc or type(exc).__name__}"
                    )
                if not chunk:
                    return True
                t = monotonic_ns()
                chunks.append(chunk)
                times.append(t)
                held += len(chunk)
                try:
                    await response.write(chunk)
                except ConnectionError:
                    client_left(ex, t)
                    return False
                own += monotonic_ns() - t
        finally:
            ex.spent(own)

    async def _spill(self, ex: Exchange, watchdog: Watch | None) -> int:
        if watchdog is not None:
            watchdog.pause()  # waiting for our own writer is not the upstream being silent
        try:
            return await self.recording.spill(ex)
        finally:
            if watchdog is not None:
                watchdog.resume()


def client_left(ex: Exchange, at: int) -> None:
    """Record that the client went away mid-response at monotonic time `at`: a timeout when it had declared an idle
    limit (IDLE_TAG) and the upstream had been silent that long (the proxy reads each event before its client does,
    so the client's own wait was no longer), else a client disconnect."""
    try:
        limit = float(ex.tags.get(IDLE_TAG, ""))
    except ValueError:
        limit = 0.0
    last = ex.times[-1] if ex.times else ex.headers_at
    if limit > 0 and last is not None and (at - last) / 1e9 >= limit:
        ex.fail(TIMEOUT, f"stream silent for {limit:g} s: the client's idle timeout ended it")
    else:
        ex.fail(CLIENT_DISCONNECTED, "the client went away mid-response")


def _stop_holding(ex: Exchange, chunks: list[bytes], held: int) -> list[bytes]:
    """A compressed body past what is recorded of one (bench.proxy.parts.hold_no_more): the rest is forwarded, not
    held, but for its last reads (for `[DONE]`); their arrival times are still kept (one int a read): the idle watch
    reads the last, the record only its own reads'. Returns the list the next reads go to."""
    if chunks is ex.chunks:
        hold_no_more(ex, held)
        chunks = []
    del chunks[:-2]
    return chunks


async def _client_had_it_all(
    upstream: aiohttp.ClientResponse, ex: Exchange, chunks: list[bytes], times: list[int]
) -> bool:
    """The client left (aiohttp cancels the handler when its connection drops): whether it had the whole answer.
    The synchronous openai SDK closes as soon as it has read `data: [DONE]`, often before the upstream's end of body
    reached us: if that end comes now, with nothing after what the client was sent, the client had all of it."""
    uncancel()
    left_at = monotonic_ns()
    ended, tail = await _ends_now(upstream.content)
    if tail:
        # Bytes past what the client was sent are still the upstream's: recorded, never dropped.
        chunks.append(tail)
        times.append(monotonic_ns())
    if tail or not (ended or (ex.response.streamed and sent_done(chunks))):
        client_left(ex, left_at)
        return False
    if not ended:
        # The client had the stream up to its `[DONE]`; the upstream's end of body is late (or the loop was stalled
        # past the grace). Still whole for the client; the upstream connection is not reused.
        upstream.close()
    return True


async def _ends_now(content: aiohttp.StreamReader) -> tuple[bool, bytes]:
    """Whether the upstream's body ended within END_GRACE seconds, and any bytes it sent first."""
    try:
        async with asyncio.timeout(END_GRACE):
            tail = await content.readany()
    except (TimeoutError, aiohttp.ClientError):
        return False, b""
    return not tail, tail


def _cut(request: web.BaseRequest, ex: Exchange, outcome: str, why: str) -> bool:
    ex.cut_off(outcome, why)
    abort_client(request)
    return False
