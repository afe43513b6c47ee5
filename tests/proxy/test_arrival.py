"""The proxy's own HTTP server: when a request counts as arrived, and `Expect: 100-continue`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from bench.core.cassette import read_cassette
from bench.proxy import start_proxy
from tests.proxy.conftest import MESSAGES, SECRET
from tests.support.upstream import Upstream


def chat_request(body: dict[str, object], *, close: bool = False, expect: bool = False) -> tuple[bytes, bytes]:
    """A raw HTTP/1.1 chat completion request: its head and its body."""
    data = json.dumps({"model": "test-model", "messages": MESSAGES, **body}).encode()
    lines = [
        "POST /v1/chat/completions HTTP/1.1",
        "Host: proxy",
        f"Authorization: Bearer {SECRET}",
        "Content-Type: application/json",
        f"Content-Length: {len(data)}",
    ]
    lines += ["Connection: close"] if close else []
    lines += ["Expect: 100-continue"] if expect else []
    return ("\r\n".join(lines) + "\r\n\r\n").encode(), data


async def test_a_request_is_timed_from_its_arrival_not_from_when_its_handler_started(
    upstream: Upstream, cassettes: Path
) -> None:
    """Two pipelined requests arrive in one read; the second waits for the first (150 ms) before it is handled.
    That wait is time its client has waited: it is inside the second's recorded times, not before its t0."""
    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    slow = chat_request({"stream": True, "x_ttft_ms": 150, "x_delay_ms": 1, "x_words": 2})
    quick = chat_request({}, close=True)
    reader, writer = await asyncio.open_connection("127.0.0.1", int(proxy.url.rsplit(":", 1)[1]))
    writer.write(b"".join([*slow, *quick]))
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    await proxy.close()
    assert answer.count(b"HTTP/1.1 200 OK") == 2
    assert proxy.cassette_path is not None
    first, second = sorted(read_cassette(proxy.cassette_path)[1], key=lambda r: r.started)
    assert first.request.body == slow[1] and second.request.body == quick[1]
    assert second.started - first.started < 50_000
    assert second.timing.sent_upstream >= 140_000


async def test_expect_100_continue_is_answered_before_the_body_is_sent(upstream: Upstream, cassettes: Path) -> None:
    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    head, body = chat_request({}, close=True, expect=True)
    reader, writer = await asyncio.open_connection("127.0.0.1", int(proxy.url.rsplit(":", 1)[1]))
    writer.write(head)
    # The body is sent only after the interim answer: a proxy that waited for the body first would never answer.
    interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
    writer.write(body)
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    await proxy.close()
    assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert answer.startswith(b"HTTP/1.1 200 OK") and b"chat.completion" in answer
    assert "expect" not in {k.lower() for k in upstream.requests[-1].headers}


async def test_an_expectation_the_proxy_cannot_meet_is_refused(upstream: Upstream, cassettes: Path) -> None:
    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes, mode="passthrough")
    head, body = chat_request({}, close=True)
    reader, writer = await asyncio.open_connection("127.0.0.1", int(proxy.url.rsplit(":", 1)[1]))
    writer.write(head.replace(b"\r\n\r\n", b"\r\nExpect: teapot\r\n\r\n") + body)
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    await proxy.close()
    assert answer.startswith(b"HTTP/1.1 417") and b"bad_expect" in answer
    assert not upstream.requests
