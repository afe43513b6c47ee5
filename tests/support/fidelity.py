"""Compare what `bench proxy` recorded with what an openai SDK client measured for the same streamed requests.

Shared by tests/e2e (a coarse bound that catches mis-stamped reads) and benchmarks/timing_fidelity.py (the figure).

The client is measured at two levels on the same requests:
- `sdk`: when the SDK yields each chunk with choices, from the httpx request hook; this includes the SDK's own
  request building, SSE decoding and pydantic parsing.
- `bytes`: as serving benchmarks measure (vLLM stamps each raw SSE event on arrival, before decoding it): from the
  request handed to the HTTP transport to the raw read that completed each event with choices.
- `wire`: the same events at the socket: from the first write of the request's bytes to the socket read that
  delivered them, so the client's HTTP stack (httpcore, h11, anyio: ~0.5 ms here) is not counted as time the
  request spent on its way. It is what the proxy's own stamps measure on its side (docs/proxy.md), so it is the
  figure that says how well the recording agrees with what the client could have seen.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpcore2
import httpx2
from openai import AsyncOpenAI, DefaultAsyncHttpxClient

from bench.core.cassette import find_cassettes, read_cassette
from bench.core.cassette.records import Exchange
from bench.core.parse import parse_exchange
from bench.core.sse import SSEParser
from tests.support.llm_server import MODEL_ALIAS, free_port


@dataclass
class Level:
    """Client minus recorded at one level of the client, in microseconds."""

    ttft_diff_us: list[float] = field(default_factory=list)  # per request
    itl_diff_us: list[float] = field(default_factory=list)  # per event gap
    itl_us: list[float] = field(default_factory=list)  # the recorded gaps themselves
    # requests whose recorded event count differs from the client's, or that recorded no first token
    mismatched: int = 0


@dataclass
class Fidelity:
    recorded: int = 0
    sdk: Level = field(default_factory=Level)
    bytes: Level = field(default_factory=Level)
    wire: Level = field(default_factory=Level)


@dataclass
class Stream:
    """One request as the transport saw it: when it was handed over, and every raw body read with its arrival;
    and as the socket saw it: its first write, and for each body read the socket read that delivered it."""

    sent: float
    reads: list[tuple[float, bytes]] = field(default_factory=list)
    wire_sent: float = 0.0
    wire_reads: list[tuple[float, bytes]] = field(default_factory=list)


@dataclass
class Wire:
    """Socket stamps of the client's connection (the requests go one after another on it)."""

    first_write: float | None = None
    last_read: float = 0.0


class _WireStream(httpcore2.AsyncNetworkStream):
    def __init__(self, inner: httpcore2.AsyncNetworkStream, wire: Wire) -> None:
        self._inner = inner
        self._wire = wire

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data = await self._inner.read(max_bytes, timeout)
        self._wire.last_read = time.perf_counter()
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if self._wire.first_write is None:
            self._wire.first_write = time.perf_counter()
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _WireBackend(httpcore2.AsyncNetworkBackend):
    def __init__(self, wire: Wire) -> None:
        self._inner = httpcore2.AnyIOBackend()
        self._wire = wire

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore2.AsyncNetworkStream:
        stream = await self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        return _WireStream(stream, self._wire)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _PoolBody(httpx2.AsyncByteStream):
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self._inner:
            yield part

    async def aclose(self) -> None:
        await self._inner.aclose()


class WireTransport(httpx2.AsyncBaseTransport):
    """httpx's HTTP/1.1 transport on httpcore's connection pool, as the SDK's default one is, with a network
    backend that stamps the socket's reads and writes (httpcore's public extension point for that)."""

    def __init__(self) -> None:
        self.wire = Wire()
        self._pool = httpcore2.AsyncConnectionPool(network_backend=_WireBackend(self.wire))

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        target = httpcore2.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path)
        self.wire.first_write = None
        core = httpcore2.Request(
            request.method, target, headers=request.headers.raw, content=request.stream, extensions=request.extensions
        )
        response = await self._pool.handle_async_request(core)
        return httpx2.Response(
            response.status, headers=response.headers, stream=_PoolBody(response.stream), extensions=response.extensions
        )

    async def aclose(self) -> None:
        await self._pool.aclose()


class _StampedBody(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, stream: Stream, wire: Wire) -> None:
        self._inner = inner
        self._stream = stream
        self._wire = wire

    async def __aiter__(self) -> AsyncIterator[bytes]:
        reads, wire_reads, wire = self._stream.reads, self._stream.wire_reads, self._wire
        async for part in self._inner:
            # Stamped before the SDK sees the bytes: its decoding is not network latency. h11 turns each socket
            # read into body parts at once, so the latest socket read is the one that delivered this part.
            reads.append((time.perf_counter(), part))
            wire_reads.append((wire.last_read, part))
            yield part

    async def aclose(self) -> None:
        await self._inner.aclose()


class StampingTransport(httpx2.AsyncBaseTransport):
    """Wraps the real transport and keeps the byte-level timing of every request that goes through it."""

    def __init__(self, inner: WireTransport) -> None:
        self._inner = inner
        self.streams: list[Stream] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        stream = Stream(sent=time.perf_counter())
        self.streams.append(stream)
        response = await self._inner.handle_async_request(request)
        assert isinstance(response.stream, httpx2.AsyncByteStream) and self._inner.wire.first_write is not None
        stream.wire_sent = self._inner.wire.first_write
        response.stream = _StampedBody(response.stream, stream, self._inner.wire)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def _has_choices(data: str) -> bool:
    if not data or data == "[DONE]":
        return False
    obj = json.loads(data)
    return isinstance(obj, dict) and bool(obj.get("choices"))


def choice_event_times(reads: list[tuple[float, bytes]]) -> list[float]:
    """Arrival of the read that completed each event with non-empty choices (vLLM's token events)."""
    parser = SSEParser()
    times: list[float] = []
    for t, part in reads:
        times.extend(t for event in parser.feed(part) if _has_choices(event.data))
    return times


def _compare(level: Level, records: list[Exchange], client: list[tuple[float, list[float]]]) -> None:
    """`client` holds per request the send stamp and the stamps of its events with choices, in seconds."""
    for record, (sent, stamps) in zip(records, client, strict=False):
        timing = parse_exchange(record).timing
        if timing.ttft_us is None or not stamps or len(timing.itl_us) != len(stamps) - 1:
            level.mismatched += 1
            continue
        level.ttft_diff_us.append((stamps[0] - sent) * 1e6 - timing.ttft_us)
        gaps = [(b - a) * 1e6 for a, b in itertools.pairwise(stamps)]
        level.itl_diff_us.extend(c - r for c, r in zip(gaps, timing.itl_us, strict=True))
        level.itl_us.extend(timing.itl_us)


async def wait_for_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def _stream_chats(
    port: int, requests: int, max_tokens: int
) -> tuple[list[tuple[float, list[float]]], StampingTransport]:
    """Stream the chats; returns the SDK-level stamps per request and the transport holding the byte-level ones."""
    sent: list[float] = []

    async def on_request(request: httpx2.Request) -> None:
        # The SDK-level clock starts when the request goes on the wire, not while the SDK builds it.
        sent.append(time.perf_counter())

    transport = StampingTransport(WireTransport())
    http = DefaultAsyncHttpxClient(transport=transport, event_hooks={"request": [on_request]})
    client = AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="k", http_client=http)
    sdk: list[tuple[float, list[float]]] = []
    for i in range(requests):
        stream = await client.chat.completions.create(
            model=MODEL_ALIAS,
            messages=[{"role": "user", "content": f"Count from {i} to {i + 20}."}],
            max_tokens=max_tokens,
            temperature=0,
            stream=True,
        )
        sdk.append((sent[-1], [time.perf_counter() async for chunk in stream if chunk.choices]))
    await client.close()
    return sdk, transport


async def measure_fidelity(upstream: str, cassettes: Path, requests: int, max_tokens: int = 48) -> Fidelity:
    """Stream `requests` chats through a `bench proxy` subprocess (as users run it, so the client's event loop
    measures only itself) and compare the client's clock, at both levels, with the recorded timing."""
    port = free_port()
    cmd = [sys.executable, "-m", "bench", "proxy", "--upstream", upstream, "--port", str(port)]
    proc = subprocess.Popen([*cmd, "--cassettes", str(cassettes)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        await wait_for_port(port)
        sdk, transport = await _stream_chats(port, requests, max_tokens)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    [cassette] = find_cassettes([cassettes])
    _, records = read_cassette(cassette)
    result = Fidelity(recorded=len(records))
    _compare(result.sdk, records, sdk)
    _compare(result.bytes, records, [(s.sent, choice_event_times(s.reads)) for s in transport.streams])
    _compare(result.wire, records, [(s.wire_sent, choice_event_times(s.wire_reads)) for s in transport.streams])
    return result
