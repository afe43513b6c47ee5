"""Answering from the recordings: which recording a request gets (`Playback.take`), serving it read by read on its
recorded schedule (`serve`), and the OpenAI-shaped 404 naming the nearest recording for a request none matches
(`miss`). Never a network connection."""

from __future__ import annotations

import asyncio
from time import monotonic_ns

from aiohttp import web

from bench.core.cassette.format import CLIENT_DISCONNECTED, UPSTREAM_ERROR
from bench.proxy.downstream import abort_client, client_headers, end_whole
from bench.proxy.error_responses import error_response
from bench.proxy.recorder import Exchange
from bench.proxy.recordings import Recorded, ReplayIndex, describe_miss
from bench.proxy.replay_body import BodyUnreadable, recorded_reads
from bench.proxy.sink import Recording
from bench.proxy.state import ProxyStats

MISS_HINT = "record it with --mode auto or fix the request"


class Playback:
    """The recordings a proxy answers from (`index`), at which pace (0: instant, 1: as recorded), whether replay mode
    serves a used-up fingerprint again from its first recording (`repeat`), and the messages of the misses so far, in
    order (`misses`; `hint` says how to fix one)."""

    def __init__(
        self,
        index: ReplayIndex,
        recording: Recording,
        stats: ProxyStats,
        *,
        pace: float = 1.0,
        repeat: bool = True,
        hint: str = MISS_HINT,
    ) -> None:
        self.index = index
        self.recording = recording
        self.stats = stats
        self.pace = pace
        self.repeat = repeat
        self.hint = hint
        self.misses: list[str] = []

    def take(self, ex: Exchange, *, wrap: bool) -> Recorded | None:
        """The next recording of the request's fingerprint, None if there is none left; `wrap`: a used-up one starts
        again from its first recording."""
        index = self.index
        r = ex.request
        return index.take(index.key_for(r.method, r.path, r.query, r.body, r.fp), wrap=wrap)

    async def serve(
        self, request: web.BaseRequest, ex: Exchange, hit: Recorded, mode: str | None = None
    ) -> web.StreamResponse:
        """The recorded status, headers and bytes, read by read, on the recorded schedule scaled by the pace; the
        exchange is recorded as a replay of `hit` (with `mode`, when given, as its mode)."""
        self.stats.replayed += 1
        rec = hit.record
        ex.replaying(rec, hit.cassette, hit.id, mode)
        if self.pace:
            await _sleep_until(ex.t0 + int((rec.timing.headers or 0) * 1000 * self.pace))
        ex.head_sent(monotonic_ns())
        response = web.StreamResponse(status=rec.response.status or 200, headers=client_headers(ex.response.headers))
        await response.prepare(request)
        try:
            if not await self._body(response, ex, hit):
                return response
        except BodyUnreadable as exc:
            ex.cut_off(UPSTREAM_ERROR, f"the recorded body could not be read back: {exc}")
            abort_client(request)
            return response
        if rec.response.cut:
            # The recorded upstream broke the body off: break it off the same way.
            ex.cut_off(rec.outcome, str(rec.error))
            abort_client(request)
            return response
        await end_whole(self.recording, ex, response)
        return response

    async def _body(self, response: web.StreamResponse, ex: Exchange, hit: Recorded) -> bool:
        """The recorded reads to the client; False if the client left meanwhile. A large answer's body comes from its
        cassette part by part (bench.proxy.replay_body), and the replay's own record writes it in parts as a
        recording does: neither side holds it whole."""
        recording = self.recording
        limit, compressed = recording.limit(ex)
        keep = recording.sink is not None  # else nothing records this replay: the body is not kept
        pace, t0 = self.pace, ex.t0
        recorded_first_token = hit.record.timing.first_token
        offset_us = held = 0
        async for chunk, delta in recorded_reads(hit, hit.record):
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
            if recorded_first_token is not None and offset_us >= recorded_first_token:
                ex.token_at(t)
            try:
                await response.write(chunk)
            except ConnectionError:
                ex.fail(CLIENT_DISCONNECTED, "the client went away mid-response")
                return False
        return True

    async def miss(self, ex: Exchange) -> web.Response:
        """The 404 for a request no recording matches, naming the nearest; recorded in the replay's cassette: a
        replayed run's scores then show what it asked that was never recorded, instead of a gap."""
        self.stats.misses += 1
        r = ex.request
        nearest = self.index.nearest(r.method, r.path, r.query, r.body)
        message = describe_miss(r.method, r.path, r.fp, nearest, hint=self.hint)
        self.misses.append(message)
        extra = {}
        if nearest is not None:
            extra["nearest"] = {"cassette": nearest[0].cassette, "id": nearest[0].id, "differs": nearest[1]}
        missed = error_response(404, message, type="invalid_request_error", code="replay_miss", **extra)
        assert isinstance(missed.body, bytes)
        headers = [[str(k), v] for k, v in missed.headers.items()]  # str: a record holds plain strings, not istr
        ex.answered_by_proxy(missed.status, headers, missed.body, UPSTREAM_ERROR, message)
        await self.recording.persist(ex)  # in the cassette before the client has the answer, as every response
        return missed


async def _sleep_until(deadline_ns: int) -> None:
    delay = (deadline_ns - monotonic_ns()) / 1e9
    if delay > 0:
        await asyncio.sleep(delay)
