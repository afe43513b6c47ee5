"""The proxy's HTTP server against hostile clients: malformed requests, bodies over the limit, clients that trickle
their request or go silent. Raw bytes over a socket; each check waits for the server to close the connection, with a
generous bound that only a broken server reaches."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bench.proxy import ClientLimits, RunningProxy, start_proxy
from tests.proxy.conftest import MESSAGES, SECRET
from tests.proxy.test_arrival import chat_request
from tests.support.upstream import Upstream

CLOSED_WITHIN = 30.0  # seconds: a correct server closes after its bound (well under a second here)
SHORT = 0.3  # the bound under test; the others stay at 60 s, so that no other bound can fire on a loaded machine
LONG = ClientLimits(header_timeout=60, keepalive_timeout=60, body_timeout=60)

MALFORMED = {
    "bad HTTP version": b"GET /v1/models HTTP/9.7\r\nHost: proxy\r\n\r\n",
    "8 KB+ header": b"GET /v1/models HTTP/1.1\r\nHost: proxy\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n",
    "Content-Length abc": b"POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\nContent-Length: abc\r\n\r\n",
    "Content-Length and Transfer-Encoding": (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\nContent-Length: 5\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    ),
    "control character next to a key": (
        b"GET /v1/models HTTP/1.1\r\nHost: proxy\r\nAuthorization: Bearer " + SECRET.encode() + b"\x01x\r\n\r\n"
    ),
    "TLS on the HTTP port": b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\r\n\r\n",
}


@pytest.fixture
async def proxy(upstream: Upstream, cassettes: Path, request: pytest.FixtureRequest) -> AsyncIterator[RunningProxy]:
    """The proxy with the bound a test names in `@pytest.mark.parametrize("proxy", [...], indirect=True)` short."""
    bounds = {getattr(request, "param", ""): SHORT} if getattr(request, "param", "") else {}
    running = await start_proxy(upstream=upstream.url, cassettes=cassettes, limits=replace(LONG, **bounds))
    yield running
    await running.close()


async def connect(proxy: RunningProxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", int(proxy.url.rsplit(":", 1)[1]))


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """One response (Content-Length framed): status, headers (lower-case names), body."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), CLOSED_WITHIN)
    status_line, *lines = head.decode().split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines if line)
    headers = {k: v for k, v in headers.items()}
    body = await asyncio.wait_for(reader.readexactly(int(headers["content-length"])), CLOSED_WITHIN)
    return int(status_line.split()[1]), headers, body


async def closed_by_server(reader: asyncio.StreamReader) -> bytes:
    """Everything the server still sends, up to its close; fails if it keeps the connection open."""
    return await asyncio.wait_for(reader.read(), CLOSED_WITHIN)


def openai_error(body: bytes, code: str) -> dict[str, Any]:
    error = json.loads(body)["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["code"] == code
    assert error["type"] == "invalid_request_error" and error["message"].startswith("bench proxy: ")
    return dict(error)


def proxy_log(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """What the proxy and its aiohttp server logged (not what the garbage collector says about earlier tests)."""
    return [r for r in caplog.records if r.name.startswith(("bench", "aiohttp"))]


def one_line_each(caplog: pytest.LogCaptureFixture, count: int) -> list[str]:
    """The proxy's log lines: `count` of them, one line each, no traceback anywhere in the proxy's log."""
    assert not [r for r in proxy_log(caplog) if r.exc_info], "a traceback was logged"
    lines = [r.getMessage() for r in caplog.records if r.name == "bench.proxy"]
    assert len(lines) == count and all("\n" not in line for line in lines), lines
    return lines


@pytest.mark.parametrize("raw", MALFORMED.values(), ids=MALFORMED.keys())
async def test_a_malformed_request_gets_an_openai_shaped_400_and_one_log_line(
    proxy: RunningProxy, raw: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    reader, writer = await connect(proxy)
    writer.write(raw)
    status, headers, body = await read_response(reader)
    assert await closed_by_server(reader) == b""
    writer.close()
    assert status == 400 and headers["content-type"].startswith("application/json")
    error = openai_error(body, "bad_request")
    assert error["message"].startswith("bench proxy: malformed HTTP request: ")
    (line,) = one_line_each(caplog, 1)
    assert "400" in line and error["message"].split("request: ")[1] in line
    assert SECRET not in line and SECRET not in body.decode()
    assert proxy.stats.bad_requests == 1


async def test_a_body_over_the_limit_gets_an_openai_shaped_413(
    proxy: RunningProxy, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    declared = b"POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\nContent-Length: 300000000\r\n\r\n"
    reader, writer = await connect(proxy)
    writer.write(declared)
    status, _, body = await read_response(reader)
    writer.close()
    assert status == 413 and "300000000 bytes" in openai_error(body, "request_too_large")["message"]

    # A chunked body has no length to check first: it is refused once it passes the limit.
    monkeypatch.setattr("bench.proxy.app.MAX_REQUEST_BODY", 1 << 20)
    chunk = b"x" * 65536
    chunked = b"POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunked += (b"10000\r\n" + chunk + b"\r\n") * 20 + b"0\r\n\r\n"
    reader, writer = await connect(proxy)
    writer.write(chunked)
    status, _, body = await read_response(reader)
    writer.close()
    assert status == 413 and "over the proxy's limit" in openai_error(body, "request_too_large")["message"]
    lines = one_line_each(caplog, 2)
    assert all(line.startswith("bench proxy: 413 for POST /v1/chat/completions") for line in lines)
    assert proxy.stats.bad_requests == 2 and proxy.stats.exchanges == 0


@pytest.mark.parametrize("proxy", ["header_timeout"], indirect=True)
async def test_silent_and_trickling_connections_are_closed_after_the_header_timeout(
    proxy: RunningProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    silent = [await connect(proxy) for _ in range(5)]
    trickling = [await connect(proxy) for _ in range(5)]
    for _, writer in trickling:
        writer.write(b"POST /v1/chat/compl")

    async def trickle(writer: asyncio.StreamWriter) -> None:
        for byte in b"etions HTTP/1.1\r\nHost: proxy\r\n":
            if writer.is_closing():
                return
            writer.write(bytes([byte]))
            await asyncio.sleep(0.05)

    feeders = [asyncio.create_task(trickle(w)) for _, w in trickling]
    for reader, _ in silent:
        assert await closed_by_server(reader) == b""  # nothing came: closed without a word
    for reader, _ in trickling:
        status, _, body = await read_response(reader)
        assert status == 408 and "--header-timeout" in openai_error(body, "request_timeout")["message"]
        assert await closed_by_server(reader) == b""
    for task in feeders:
        task.cancel()
    for _, writer in silent + trickling:
        writer.close()
    assert proxy.stats.slow_clients == 10
    assert len(one_line_each(caplog, 10)) == 10


@pytest.mark.parametrize("proxy", ["header_timeout"], indirect=True)
async def test_a_request_that_arrives_in_time_is_not_cut_by_the_header_timeout(
    proxy: RunningProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """The bound is on the head only: a stream that lasts longer than it (here 0.5 s against 0.3 s) is not cut, and the
    next request on the same connection gets its own bound."""
    reader, writer = await connect(proxy)
    for close in (False, True):
        head, body = chat_request({"stream": True, "x_ttft_ms": 0, "x_delay_ms": 60, "x_words": 8}, close=close)
        writer.write(head + body)
        answer = await closed_by_server(reader) if close else await reader.readuntil(b"data: [DONE]\n\n\r\n0\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 200 OK") and answer.count(b"data: ") == 11
    writer.close()
    assert proxy.stats.slow_clients == 0 and proxy.stats.exchanges == 2
    one_line_each(caplog, 0)


async def test_an_idle_kept_alive_connection_is_closed_and_a_late_head_is_bounded_too(
    upstream: Upstream, cassettes: Path
) -> None:
    # Long header timeout: the idle connection is closed by the keep-alive bound.
    limits = replace(LONG, keepalive_timeout=SHORT)
    async with await start_proxy(upstream=upstream.url, cassettes=cassettes, limits=limits) as proxy:
        reader, writer = await connect(proxy)
        writer.write(b"GET /v1/models HTTP/1.1\r\nHost: proxy\r\n\r\n")
        status, _, _ = await read_response(reader)
        assert status == 200
        assert await closed_by_server(reader) == b""
        writer.close()
    # Long keep-alive: a head begun on a kept-alive connection is closed by the header bound.
    limits = replace(LONG, header_timeout=SHORT)
    async with await start_proxy(upstream=upstream.url, cassettes=cassettes, limits=limits) as proxy:
        reader, writer = await connect(proxy)
        writer.write(b"GET /v1/models HTTP/1.1\r\nHost: proxy\r\n\r\n")
        status, _, _ = await read_response(reader)
        await asyncio.sleep(0.5)  # idle longer than the header bound: idleness is the keep-alive bound's business
        writer.write(b"GET /v1/mod")
        status, _, body = await read_response(reader)
        assert status == 408 and openai_error(body, "request_timeout")
        assert await closed_by_server(reader) == b""
        writer.close()
        assert proxy.stats.slow_clients == 1


@pytest.mark.parametrize("proxy", ["body_timeout"], indirect=True)
async def test_a_trickling_body_gets_a_408_and_the_connection_is_closed(
    proxy: RunningProxy, caplog: pytest.LogCaptureFixture
) -> None:
    head, body = chat_request({"messages": MESSAGES})
    reader, writer = await connect(proxy)
    writer.write(head + body[:10])

    async def trickle() -> None:
        for byte in body[10:]:
            if writer.is_closing():
                return
            writer.write(bytes([byte]))
            await asyncio.sleep(0.05)

    feeder = asyncio.create_task(trickle())
    status, _, answer = await read_response(reader)
    assert status == 408 and "--body-timeout" in openai_error(answer, "request_timeout")["message"]
    assert await closed_by_server(reader) == b""
    feeder.cancel()
    writer.close()
    (line,) = one_line_each(caplog, 1)
    assert line.startswith("bench proxy: 408 for POST /v1/chat/completions")
    assert proxy.stats.bad_requests == 1 and proxy.stats.exchanges == 0


async def test_a_bug_in_the_proxy_is_an_openai_shaped_500_with_its_traceback_logged(
    proxy: RunningProxy, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> str:
        raise RuntimeError("planted bug")

    monkeypatch.setattr("bench.proxy.app.fingerprint", broken)
    monkeypatch.setattr(proxy.handle, "fingerprint_first", True)  # fingerprints every request, as replay does
    head, body = chat_request({}, close=True)
    reader, writer = await connect(proxy)
    writer.write(head + body)
    status, _, answer = await read_response(reader)
    writer.close()
    error = json.loads(answer)["error"]
    assert status == 500 and error["code"] == "proxy_error" and error["type"] == "server_error"
    (record,) = [r for r in proxy_log(caplog) if r.name == "bench.proxy"]
    assert record.exc_info is not None and "planted bug" in str(record.exc_info[1])
