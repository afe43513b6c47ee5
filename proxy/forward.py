"""Streaming an exchange to and from the upstream, and serving a recorded one.

One client write per upstream read, bytes untouched (the upstream session has `auto_decompress=False`), so the
client sees the upstream's own chunking and timing (docs/proxy.md: merging reads makes ITLs read ~0). The loop uses
`readany()` directly: an async generator per response would cost more per chunk for nothing.
"""

from __future__ import annotations

import asyncio
from time import monotonic_ns

import aiohttp
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from bench.core.cassette.format import CLIENT_DISCONNECTED, TIMEOUT, UPSTREAM_ERROR
from bench.core.cassette.records import ReplayOf
from bench.proxy.error_responses import JSON_TYPE, error_body
from bench.proxy.identity import identity_headers
from bench.proxy.parts import hold_no_more
from bench.proxy.recorder import Exchange
from bench.proxy.recordings import Recorded, sent_done
from bench.proxy.replay_body import BodyUnreadable, recorded_reads
from bench.proxy.state import ProxyState
from bench.proxy.watchdog import Watch

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
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


def upstream_headers(request: web.BaseRequest, state: ProxyState) -> CIMultiDict[str]:
    drop = NOT_FORWARDED | _connection_listed(request.headers) if "Connection" in request.headers else NOT_FORWARDED
    out: CIMultiDict[str] = CIMultiDict()
    for name, value in request.headers.items():
        low = name.lower()
        if low in drop or low.startswith(TAG_PREFIX):
            continue
        out.add(name, value)
    if state.upstream_key is not None or state.client_token is not None:
        # The client's Authorization held the proxy's token (or the upstream key replaces it): never pass it on.
        out.popall("Authorization", None)
        if state.client_token is not None and out.get("api-key", "").strip() == state.client_token:
            del out["api-key"]
        if state.upstream_key is not None:
            out["Authorization"] = f"Bearer {state.upstream_key}"
    return out


def client_headers(headers: list[list[str]]) -> CIMultiDict[str]:
    listed: set[str] = set()
    for name, value in headers:
        if name.lower() == "connection":
            listed.update(token.strip().lower() for token in value.split(","))
    out: CIMultiDict[str] = CIMultiDict()
    for name, value in headers:
        low = name.lower()
        if low not in HOP_BY_HOP and low not in listed:
            out.add(name, value)
    return out


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


def _abort_client(request: web.BaseRequest) -> None:
    """Cut the client's connection the way the upstream cut ours, so it sees an incomplete body, not a clean end."""
    transport = request.transport
    if transport is not None:
        transport.close()


def _error(ex: Exchange, status: int, outcome: str, message: str) -> web.Response:
    code = "upstream_timeout" if outcome == TIMEOUT else "bad_gateway"
    body = error_body(message, type="upstream_error", code=code)
    ex.answered_by_proxy(status, [["Content-Type", JSON_TYPE], [PROXY_ERROR_HEADER, code]], body, outcome, message)
    return web.Response(status=status, body=body, content_type=JSON_TYPE, headers={PROXY_ERROR_HEADER: code})


def _late(state: ProxyState) -> str:
    return f"upstream {state.upstream_label} did not answer in time"


async def _failed(state: ProxyState, ex: Exchange, status: int, outcome: str, message: str) -> web.Response:
    """The proxy's own 502/504 for a failed upstream: a whole answer for its client, so recorded before it is sent."""
    response = _error(ex, status, outcome, message)
    await state.persist(ex)
    return response


async def forward(request: web.BaseRequest, state: ProxyState, ex: Exchange) -> web.StreamResponse:
    assert state.session is not None and state.upstream_label is not None
    url = state.target(ex.path, ex.query)
    headers = upstream_headers(request, state)
    task = asyncio.current_task()
    assert task is not None
    watchdog = state.idle_sweep.watch(ex, task) if state.idle_sweep is not None else None
    try:
        return await _forward(request, state, ex, url, headers, watchdog)
    finally:
        if watchdog is not None:
            watchdog.stop()


async def _forward(
    request: web.BaseRequest,
    state: ProxyState,
    ex: Exchange,
    url: URL,
    headers: CIMultiDict[str],
    watchdog: Watch | None,
) -> web.StreamResponse:
    assert state.session is not None
    ex.sent_upstream = now = monotonic_ns()
    ex.own_ns += now - ex.t0
    try:
        upstream = await state.session.request(
            ex.method,
            url,
            headers=headers,
            data=ex.body or None,
            allow_redirects=False,
        )
    except asyncio.CancelledError:
        if watchdog is None or not watchdog.absorb():
            raise
        state.stats.errors += 1
        return await _failed(state, ex, 504, TIMEOUT, _late(state))
    except TimeoutError:
        state.stats.errors += 1
        return await _failed(state, ex, 504, TIMEOUT, _late(state))
    except aiohttp.ClientError as exc:
        state.stats.errors += 1
        reason = str(exc) or type(exc).__name__
        return await _failed(state, ex, 502, UPSTREAM_ERROR, f"upstream {state.upstream_label} failed: {reason}")

    t = ex.headers_at = monotonic_ns()
    finished = False
    try:
        ex.status = upstream.status
        raw_headers = [[str(k), v] for k, v in upstream.headers.items()]  # str: a record holds plain strings
        ex.resp_headers = raw_headers
        content_type = upstream.headers.get("Content-Type", "")
        ex.streamed = content_type.startswith("text/event-stream")
        response = web.StreamResponse(
            status=upstream.status, reason=upstream.reason, headers=client_headers(raw_headers)
        )
        await response.prepare(request)
        ex.own_ns += monotonic_ns() - t
        finished = await _pump(request, upstream, response, ex, watchdog, state)
        if not finished and ex.outcome != CLIENT_DISCONNECTED:
            state.stats.errors += 1
        return response
    finally:
        # close() drops the upstream connection, which is how a client's disconnect cancels the upstream request.
        if finished:
            upstream.release()  # _pump noted the upstream's identity before the record was written
        else:
            _note_upstream(ex, upstream, state)
            upstream.close()


async def _pump(
    request: web.BaseRequest,
    upstream: aiohttp.ClientResponse,
    response: web.StreamResponse,
    ex: Exchange,
    watchdog: Watch | None,
    state: ProxyState,
) -> bool:
    """Forward the body read by read; True if it was read to its end and the client got all of it. A body past the
    sink's spill size is written to the cassette in parts as it comes (bench.proxy.parts), between two reads."""
    content = upstream.content
    chunks = ex.chunks
    times = ex.times
    recording = state.recording
    limit, compressed = recording.limit(ex)
    held = 0
    while True:
        try:
            if held >= limit:
                if compressed:
                    if chunks is ex.chunks:
                        hold_no_more(ex, held)
                        # The rest is forwarded, not held (but the last reads, for `[DONE]`); its arrival times are
                        # still kept (one int a read): the idle watch reads the last, the record only its own reads'.
                        chunks = []
                    del chunks[:-2]
                else:
                    if watchdog is not None:
                        watchdog.pause()  # waiting for our own writer is not the upstream being silent
                    try:
                        held = await recording.spill(ex)
                    finally:
                        if watchdog is not None:
                            watchdog.resume()
            chunk = await content.readany()
        except asyncio.CancelledError:
            if watchdog is not None and watchdog.absorb():
                return _cut(request, ex, TIMEOUT, "upstream went silent longer than the idle timeout mid-body")
            # A client can leave after `proxy.close()` began (its last answer whole): only the shutdown's own cut
            # after the grace, or a cancellation with the client still there, ends the exchange here.
            if state.cutting_off or request.transport is not None:
                raise
            # The client left (aiohttp cancels the handler when its connection drops). The synchronous openai SDK
            # closes as soon as it has read `data: [DONE]`, often before the upstream's end of body reached us: if
            # that end comes now, with nothing after what the client was sent, the client had the whole answer.
            _uncancel()
            left_at = monotonic_ns()
            ended, tail = await _ends_now(content)
            if tail:
                # Bytes past what the client was sent are still the upstream's: recorded, never dropped.
                chunks.append(tail)
                times.append(monotonic_ns())
            if tail or not (ended or (ex.streamed and sent_done(chunks))):
                client_left(ex, left_at)
                return False
            if not ended:
                # The client had the stream up to its `[DONE]`; the upstream's end of body is late (or the loop was
                # stalled past the grace). Still whole for the client; the upstream connection is not reused.
                upstream.close()
            chunk = b""
        except TimeoutError:
            return _cut(request, ex, TIMEOUT, "upstream took longer than the request timeout")
        except aiohttp.ClientError as exc:
            return _cut(request, ex, UPSTREAM_ERROR, f"upstream broke the body off: {exc or type(exc).__name__}")
        if not chunk:
            break
        t = monotonic_ns()
        chunks.append(chunk)
        times.append(t)
        held += len(chunk)
        try:
            await response.write(chunk)
        except ConnectionError:
            client_left(ex, t)
            return False
        ex.own_ns += monotonic_ns() - t
    _note_upstream(ex, upstream, state)
    if watchdog is not None:
        watchdog.pause()  # the body is read whole: what follows waits on our writer and the client only
    await _end_whole(state, ex, response)
    return True


async def _end_whole(state: ProxyState, ex: Exchange, response: web.StreamResponse) -> None:
    """End a response whose every body byte the client was sent: its record reaches the file first (kill -9 cannot
    lose an answer its client has whole, and the client's next request cannot overtake it in the cassette)."""
    try:
        await state.persist(ex)
        await response.write_eof()
    except ConnectionError:
        pass  # the client had the whole body and closed before its terminating chunk (see _pump): a whole answer
    except asyncio.CancelledError:
        # Cancelled (the client left, or the proxy shuts down) while the record is written: it is queued already,
        # and the client had every byte of the body, so the exchange stays complete.
        _uncancel()


def _uncancel() -> None:
    """Undo the cancellation just caught: the handler goes on to finish the exchange."""
    task = asyncio.current_task()
    assert task is not None
    task.uncancel()


async def _ends_now(content: aiohttp.StreamReader) -> tuple[bool, bytes]:
    """Whether the upstream's body ended within END_GRACE seconds, and any bytes it sent first."""
    try:
        async with asyncio.timeout(END_GRACE):
            tail = await content.readany()
    except (TimeoutError, aiohttp.ClientError):
        return False, b""
    return not tail, tail


def _note_upstream(ex: Exchange, upstream: aiohttp.ClientResponse, state: ProxyState) -> None:
    ex.server = upstream.headers.get("Server")
    ex.upstream_headers = identity_headers(upstream.headers.items(), state.secret_headers)


def _cut(request: web.BaseRequest, ex: Exchange, outcome: str, why: str) -> bool:
    ex.fail(outcome, why)
    ex.cut = True
    _abort_client(request)
    return False


async def _sleep_until(deadline_ns: int) -> None:
    delay = (deadline_ns - monotonic_ns()) / 1e9
    if delay > 0:
        await asyncio.sleep(delay)


async def serve_recorded(
    request: web.BaseRequest, state: ProxyState, ex: Exchange, hit: Recorded
) -> web.StreamResponse:
    """The recorded status, headers and bytes, read by read, on the recorded schedule scaled by the pace."""
    rec = hit.record
    resp_rec = rec.response
    timing = rec.timing
    upstream = rec.upstream
    ex.replay_of = ReplayOf(cassette=hit.cassette, id=hit.id)
    ex.status = resp_rec.status
    ex.resp_headers = [list(h) for h in resp_rec.headers]
    ex.streamed = resp_rec.streamed
    ex.model = upstream.model
    ex.system_fingerprint = upstream.system_fingerprint
    ex.server = upstream.server
    ex.upstream_headers = dict(upstream.headers)
    ex.upstream_url = upstream.url
    pace = state.pace
    t0 = ex.t0
    if pace:
        await _sleep_until(t0 + int((timing.headers or 0) * 1000 * pace))
    ex.headers_at = monotonic_ns()
    response = web.StreamResponse(status=resp_rec.status or 200, headers=client_headers(ex.resp_headers))
    await response.prepare(request)
    offset_us = 0
    recorded_first_token = timing.first_token
    # A large answer's body comes from its cassette part by part (bench.proxy.replay_body), and the replay's own record
    # writes it in parts as a recording does: neither side holds it whole.
    recording = state.recording
    limit, compressed = recording.limit(ex)
    keep = recording.sink is not None  # else nothing records this replay: the body is not kept
    held = 0
    try:
        async for chunk, delta in recorded_reads(hit, rec):
            offset_us += delta
            if held >= limit and not compressed:  # a compressed recording is served as it was held
                held = await recording.spill(ex)
            if pace:
                await _sleep_until(t0 + int(offset_us * 1000 * pace))
            t = monotonic_ns()
            if keep:
                ex.chunks.append(chunk)
            ex.times.append(t)
            held += len(chunk)
            if ex.first_token is None and recorded_first_token is not None and offset_us >= recorded_first_token:
                ex.first_token = t
            try:
                await response.write(chunk)
            except ConnectionError:
                ex.fail(CLIENT_DISCONNECTED, "the client went away mid-response")
                return response
    except BodyUnreadable as exc:
        ex.cut = True
        ex.fail(UPSTREAM_ERROR, f"the recorded body could not be read back: {exc}")
        _abort_client(request)
        return response
    if resp_rec.cut:
        # The recorded upstream broke the body off: break it off the same way.
        ex.cut = True
        ex.fail(rec.outcome, str(rec.error))
        _abort_client(request)
        return response
    await _end_whole(state, ex, response)
    return response
