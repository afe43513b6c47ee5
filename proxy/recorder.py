"""One exchange as it happens, and its cassette record (docs/cassette-format.md, `exchange`).

The hot path only appends each read and its arrival time (two clock reads and two appends per chunk); everything
else (deltas, outcome, first token, identity) is worked out once the exchange has ended, off the forwarding path.
SSE events are parsed read by read only until the first token is found, then parsing stops.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterator
from time import monotonic_ns
from typing import Any

import msgspec
import orjson

from bench.core.cassette import records
from bench.core.cassette.format import COMPLETE, TRUNCATED, UPSTREAM_ERROR
from bench.core.cassette.redact import BodyScrubber
from bench.core.decoding import decoded_record_reads
from bench.core.sse import SSEParser
from bench.proxy.identity import EDGE_BYTES, edge, edges_identity, identity_headers, payload_identity, reads_identity

# A stream that has not produced a token after this many events is not worth parsing further (CPU bound).
MAX_WATCHED_EVENTS = 256

# A chat stream's non-null finish_reason, or a Responses API stream's terminal event: that API sends no [DONE], and
# its last event carries the whole response, so its type can be far more than a few hundred bytes from the end.
FINISH_RE = re.compile(rb'"finish_reason"\s*:\s*"|"type"\s*:\s*"response\.(?:completed|incomplete|failed)"')
_STREAM_DONE_MARKERS = (b"data: [DONE]", b"data:[DONE]", b"response.completed")


def carries_token(obj: Any) -> bool:
    """True for an event with non-empty content, reasoning or a tool-call delta (chat, completions, Responses)."""
    if not isinstance(obj, dict):
        return False
    choices = obj.get("choices")
    if isinstance(choices, list):
        for choice in choices:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict) and (
                delta.get("content")
                or delta.get("reasoning_content")
                or delta.get("reasoning")
                or delta.get("tool_calls")
                or delta.get("function_call")
            ):
                return True
            if choice.get("text"):
                return True
    kind = obj.get("type")
    return isinstance(kind, str) and kind.endswith(".delta") and bool(obj.get("delta"))


class TokenWatch:
    """Feeds reads to an SSE parser until the first token; `feed` returns True once it is done watching."""

    __slots__ = ("events", "found", "model", "parser", "plain", "system_fingerprint")

    def __init__(self) -> None:
        self.parser = SSEParser()
        self.plain = True  # every read so far was one whole `data: ...` event: the parser has held nothing
        self.events = 0
        self.found = False
        self.model: str | None = None
        self.system_fingerprint: str | None = None

    def feed(self, chunk: bytes) -> bool:
        # Most upstreams send each event as one read, `data: {...}` and an empty line: while every read is that, its
        # data is the read less its frame, as the parser would find it, at a third of the parser's cost per read.
        # The first read that is anything else, and every read after it, goes through the parser.
        datas: list[str]
        if (
            self.plain
            and chunk.startswith(b"data: ")
            and chunk.endswith(b"\n\n")
            and chunk.count(b"\n") == 2
            and b"\r" not in chunk
        ):
            datas = [chunk[6:-2].decode("utf-8", "replace")]
        else:
            if self.plain and self.events:
                # The stream started with the reads taken above: an empty line tells the parser so (a BOM is
                # dropped only at a stream's start), and changes nothing else.
                self.parser.feed(b"\n")
            self.plain = False
            datas = [event.data for event in self.parser.feed(chunk)]
        for data in datas:
            self.events += 1
            if data == "[DONE]":
                continue
            try:
                obj = orjson.loads(data)
            except orjson.JSONDecodeError:
                continue
            model, fp = payload_identity(obj)
            self.model = self.model or model
            self.system_fingerprint = self.system_fingerprint or fp
            if carries_token(obj):
                self.found = True
                return True
        return self.events >= MAX_WATCHED_EVENTS


class Spill:
    """What an exchange that wrote parts of its body (bench.proxy.parts) keeps of them."""

    __slots__ = (
        "bytes",
        "failed",
        "finish_carry",
        "finish_seen",
        "first_ns",
        "first_token",
        "head",
        "prev_us",
        "raw",
        "scrubber",
        "seqs",
        "watch",
        "watch_done",
    )

    def __init__(self, scrubber: BodyScrubber, head: bytes, first_ns: int, streamed: bool) -> None:
        self.scrubber = scrubber
        self.seqs: list[int] = []
        self.bytes = 0  # written, after scrubbing
        self.raw = 0  # as received
        self.prev_us = 0  # the last written read's time since t0: the deltas go on from it
        self.first_ns = first_ns
        self.head = head  # the body's first EDGE_BYTES (served identity)
        self.watch: TokenWatch | None = TokenWatch() if streamed else None
        self.watch_done = False
        self.first_token: int | None = None
        self.finish_seen = False
        self.finish_carry = b""
        self.failed = False  # the cassette failed: the body is dropped as it comes, the record is lost anyway


def stream_finished(chunks: list[bytes], seen: bool = False) -> bool:
    """Whether a stream ended properly: `data: [DONE]` at its end, a non-null finish_reason somewhere, or a
    Responses API terminal event (`response.completed`, `.incomplete`, `.failed`). `seen`: one was found in reads
    already written in parts."""
    tail = b"".join(chunks[-4:])[-512:]
    if seen or any(marker in tail for marker in _STREAM_DONE_MARKERS):
        return True
    # Only reached for streams without [DONE] (rare): a full scan is affordable there.
    return FINISH_RE.search(b"".join(chunks)) is not None


def _us(ns: int | None, t0: int) -> int | None:
    return None if ns is None else (ns - t0) // 1000


def head_of(response: records.Response) -> records.Response:
    """A recorded response's head (everything but its body), as a replay answers with it."""
    return msgspec.structs.replace(
        response, headers=[list(h) for h in response.headers], chunks=[], chunk_us=[], raw_bytes=0, cut=False, parts=[]
    )


class Exchange:
    """One exchange as it happens. Its request (`request`), response head (`response`) and the upstream's identity
    (`upstream`) are the record's own parts, filled in as they are known; its body is its reads (`chunks`) and their
    arrival times (`times`, monotonic ns). It changes only through the methods below (the per-read loops of
    bench.proxy.forward and bench.proxy.playback append to `chunks` and `times` themselves, for speed), and
    `to_record()` makes its cassette record, the one place the proxy builds one.

    Its life: it arrives (the constructor), then either goes upstream (`sent`, `answered`, `spent`, reads), or is
    answered from a recording (`replaying`, `head_sent`, reads, `token_at`), or by the proxy itself
    (`answered_by_proxy`: a 502/504, a replay miss's 404). `fail` and `cut_off` keep its first failure; a large body
    is written in parts as it comes (`parts_begun`, `part_written`, bench.proxy.parts). Once it is over (`ended`),
    the record task (bench.proxy.persist) numbers it, settles its outcome, identifies it, fingerprints it, builds the
    record and lets the body go (`numbered`, `settle_stream`, `identify_steps`, `fingerprinted`, `to_record`,
    `release_body`).
    """

    __slots__ = (
        "chunks",
        "error",
        "first_token",
        "headers_at",
        "loop_lag_ns",
        "mode",
        "outcome",
        "own_ns",
        "persisted",
        "replay_of",
        "request",
        "response",
        "sent_upstream",
        "seq",
        "spill",
        "started_us",
        "t0",
        "tags",
        "times",
        "upstream",
    )

    def __init__(
        self,
        *,
        t0: int,
        started_us: int,
        mode: str,
        request: records.Request,
        tags: dict[str, str],
        upstream_url: str | None,
    ) -> None:
        self.t0 = t0
        self.started_us = started_us
        self.seq = 0
        self.mode = mode
        self.request = request  # its `fp` is "" until worked out (at once when replaying, else by `fingerprinted`)
        self.tags = tags
        self.response = records.Response()  # the head only: the body is `chunks` and `times` until the record
        self.upstream = records.Upstream(url=upstream_url)
        self.chunks: list[bytes] = []
        self.times: list[int] = []
        self.sent_upstream: int | None = None
        self.headers_at: int | None = None
        self.first_token: int | None = None
        self.own_ns = 0  # the proxy's own time spent on it (before the upstream request, per read forwarded)
        self.outcome = COMPLETE
        self.error: str | None = None
        self.replay_of: records.ReplayOf | None = None
        self.persisted = False  # its record was written before its response ended (bench.proxy.sink)
        self.loop_lag_ns: int | None = None  # the proxy's longest event-loop stall while it was in flight
        self.spill: Spill | None = None  # reads already written as part records (bench.proxy.parts)

    # -- answered by the upstream ------------------------------------------------------------------------------

    def sent(self, at: int) -> None:
        """The request went upstream at `at`; the proxy's own time so far is from its arrival to then."""
        self.sent_upstream = at
        self.own_ns += at - self.t0

    def answered(self, head: records.Response, at: int, secret: frozenset[str]) -> None:
        """The upstream's response head (status, headers, whether it streams) arrived at `at`; what it says of who
        served it is kept: its Server header and its identifying headers (bench.proxy.identity), but for the names
        in `secret`."""
        self.response = head
        self.headers_at = at
        headers = head.headers
        self.upstream.server = next((value for name, value in headers if name.lower() == "server"), None)
        self.upstream.headers = identity_headers(headers, secret)

    def spent(self, ns: int) -> None:
        """The proxy spent `ns` of its own on it (sending the head on, forwarding a read)."""
        self.own_ns += ns

    # -- answered from a recording -----------------------------------------------------------------------------

    def replaying(self, record: records.Exchange, cassette: str, id: str, mode: str | None = None) -> None:
        """This exchange is answered from a recording: its response head and served identity are the recording's;
        `mode`, when given, is the mode it is recorded with."""
        self.replay_of = records.ReplayOf(cassette=cassette, id=id)
        if mode is not None:
            self.mode = mode
        self.response = head_of(record.response)
        self.upstream = msgspec.structs.replace(record.upstream, headers=dict(record.upstream.headers))

    def head_sent(self, at: int) -> None:
        """The replayed response head went to the client at `at`."""
        self.headers_at = at

    def token_at(self, t: int) -> None:
        """A read at `t` reached the recording's first token (the first such read is the first token)."""
        if self.first_token is None:
            self.first_token = t

    # -- answered by the proxy, failures -----------------------------------------------------------------------

    def answered_by_proxy(self, status: int, headers: list[list[str]], body: bytes, outcome: str, why: str) -> None:
        """The proxy answered this request itself (a 502/504 for a failed upstream, a replay miss's 404): that
        answer is the recorded response, one read, and `why` the failure."""
        self.response.status = status
        self.response.headers = headers
        self.chunks.append(body)
        self.times.append(monotonic_ns())
        self.fail(outcome, why)

    def fail(self, outcome: str, error: str) -> None:
        """Keep the first failure: a client that leaves after an upstream error is still an upstream error. Once the
        whole response is being persisted, its record is built from it later: nothing that happens after (the
        client closing before the terminating chunk) makes it fail."""
        if self.outcome == COMPLETE and not self.persisted:
            self.outcome = outcome
            self.error = error

    def cut_off(self, outcome: str, error: str) -> None:
        """The body was broken off (the client's connection is cut the same way): a replay breaks it off there."""
        self.fail(outcome, error)
        self.response.cut = True

    # -- a large body in parts (bench.proxy.parts) -------------------------------------------------------------

    def parts_begun(self, spill: Spill) -> None:
        self.spill = spill

    def part_written(self, count: int, written: int, held: list[bytes]) -> None:
        """Of the first `count` reads, a part holds all but `held` (what was not safe to write yet), and the times
        of the first `written` reads went with it."""
        self.chunks[:count] = held
        del self.times[:written]

    def parts_failed(self) -> None:
        """The cassette failed while the body was written in parts: the record is lost; only the last read is kept
        (for the end-of-stream checks)."""
        del self.chunks[:-1], self.times[:-1]

    # -- over: the record (bench.proxy.sink, bench.proxy.persist) ----------------------------------------------

    def ended(self, loop_lag_ns: int | None, *, durable: bool) -> None:
        """Over, with the loop's longest stall meanwhile; `durable`: its record is written before its response ends,
        and nothing that happens after makes it fail."""
        self.loop_lag_ns = loop_lag_ns
        self.persisted = self.persisted or durable

    def numbered(self, seq: int) -> None:
        self.seq = seq

    def fingerprinted(self, fp: str) -> None:
        self.request.fp = fp

    def release_body(self) -> None:
        """Its record holds the body now: the reads go (the times stay: the idle watchdog reads them until the
        handler ends)."""
        self.chunks = []

    def decoded_reads(self) -> list[bytes]:
        """The body's reads as a client's SSE or JSON parser sees them: decoded, one piece per read, when the upstream
        compressed the body (the recorded and forwarded bytes stay as sent)."""
        if not any(k.lower() == "content-encoding" for k, _ in self.response.headers):
            return self.chunks
        return decoded_record_reads(self.response.headers, self.chunks).pieces

    def settle_stream(self) -> None:
        """Call once at the end: a streamed response with no end marker is `truncated`."""
        sp = self.spill
        ended = self.response.streamed and self.outcome in (COMPLETE, UPSTREAM_ERROR) and bool(self.chunks or sp)
        if ended and not stream_finished(self.decoded_reads(), sp is not None and sp.finish_seen):
            self.outcome = TRUNCATED
            self.error = self.error or "the stream ended without data: [DONE] and without a finish_reason"

    def identify(self) -> None:
        """First token and served identity, worked out from the recorded reads once the exchange is over.

        The reads are parsed with an incremental SSE parser, one read at a time with its arrival time, until the
        first token, exactly as a live watch would, but off the forwarding path: nothing delays a read reaching the
        client, and the result (the arrival time of the read that completed the first token event) is the same.
        """
        for _ in self.identify_steps():
            pass

    def identify_steps(self) -> Iterator[None]:
        """`identify` one read at a time: yields after each, so that a caller can let other work run in between."""
        sp = self.spill
        if self.replay_of is not None or not (self.chunks or sp):
            return  # a replay copies these from the recording
        if sp is not None and not self.response.streamed:
            content_type = next((v for k, v in self.response.headers if k.lower() == "content-type"), "")
            if "json" in content_type:  # a spilled body is past MAX_JSON_IDENTITY: read from its edges
                tail = edge(self.chunks[::-1], EDGE_BYTES, tail=True)
                self.upstream.model, self.upstream.system_fingerprint = edges_identity(sp.head, tail)
            return
        if not self.response.streamed:
            content_type = next((v for k, v in self.response.headers if k.lower() == "content-type"), "")
            # Never a copy of a large body: past MAX_JSON_IDENTITY only its first and last bytes are looked at.
            self.upstream.model, self.upstream.system_fingerprint = reads_identity(self.decoded_reads(), content_type)
            return
        reads = self.decoded_reads()
        watch = TokenWatch() if sp is None or sp.watch is None else sp.watch
        if sp is not None and sp.watch_done:
            reads = []  # the watch ended on reads written in parts
            self.first_token = sp.first_token
        # A compressed stream's first token is at the read whose decoded piece completes the first token event.
        for chunk, t in zip(reads, self.times, strict=False):
            if watch.feed(chunk):
                if watch.found:
                    self.first_token = t
                break
            yield
        self.upstream.model, self.upstream.system_fingerprint = watch.model, watch.system_fingerprint

    def to_record(self, end_ns: int | None = None) -> records.Exchange:
        """The cassette record of this exchange: the one place where the proxy builds one."""
        t0 = self.t0
        end = monotonic_ns() if end_ns is None else end_ns
        # Deltas of whole microseconds since t0, so that their running sum equals the timing fields exactly.
        sp = self.spill
        prev = 0 if sp is None else sp.prev_us  # the parts' deltas came first
        times = self.times
        if len(times) != len(self.chunks):  # a compressed body no longer held (bench.proxy.parts.hold_no_more)
            times = times[: len(self.chunks)]
        stamps = [(t - t0) // 1000 for t in times]
        deltas = list(map(operator.sub, stamps, [prev, *stamps]))
        return records.Exchange(
            id=f"x{self.seq}",
            started=self.started_us,
            mode=self.mode,
            # Copies: redacting the record must not change the live exchange (nor, replayed, the recording).
            request=msgspec.structs.replace(self.request),
            response=msgspec.structs.replace(
                self.response,
                chunks=self.chunks,
                chunk_us=deltas,
                raw_bytes=sum(map(len, self.chunks)) + (0 if sp is None else sp.raw),
                parts=[] if sp is None else list(sp.seqs),
            ),
            timing=records.Timing(
                sent_upstream=_us(self.sent_upstream, t0),
                headers=_us(self.headers_at, t0),
                first_byte=_us(sp.first_ns if sp is not None else self.times[0], t0) if self.times or sp else None,
                first_token=_us(self.first_token, t0),
                end=(end - t0) // 1000,
                proxy_us=self.own_ns // 1000,
                loop_lag_us=None if self.loop_lag_ns is None else self.loop_lag_ns // 1000,
            ),
            upstream=msgspec.structs.replace(self.upstream),
            outcome=self.outcome,
            error=self.error,
            tags=self.tags,
            replay_of=self.replay_of,
        )
