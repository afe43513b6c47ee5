"""The proxy against clients that use it as a forward proxy (a full URL, CONNECT, `OPTIONS *`: a 500 and a traceback
before), and an --upstream that carries credentials (silently dropped before)."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from bench.core.errors import BenchError
from bench.proxy import start_proxy
from tests.support.upstream import Upstream

REQUESTS = [
    b"GET http://example.com/v1/models HTTP/1.1\r\nHost: example.com\r\n\r\n",
    b"POST http://user:pw-secret@example.com/v1/chat/completions HTTP/1.1\r\nHost: example.com\r\nContent-Length: 2"
    b"\r\n\r\n{}",
    b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
    b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
]


async def _exchange(port: int, raw: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 30)  # the answer closes the connection
    writer.close()
    return data


@pytest.mark.parametrize("raw", REQUESTS)
async def test_a_forward_proxy_request_gets_an_openai_shaped_400_and_one_log_line(
    upstream: Upstream, cassettes: Path, raw: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    try:
        with caplog.at_level(logging.WARNING, logger="bench.proxy"):
            data = await _exchange(int(proxy.url.rsplit(":", 1)[1]), raw)
    finally:
        await proxy.close()
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), head
    error = json.loads(body)["error"]
    assert error["type"] == "invalid_request_error" and "reverse proxy" in error["message"]
    assert b"pw-secret" not in data
    lines = [r for r in caplog.records if r.name == "bench.proxy"]
    assert len(lines) == 1 and lines[0].exc_info is None and "400" in lines[0].getMessage()
    assert "pw-secret" not in lines[0].getMessage()
    assert upstream.requests == []  # nothing reached the upstream


async def test_upstream_credentials_are_refused_naming_where_the_key_goes(cassettes: Path) -> None:
    with pytest.raises(BenchError) as caught:
        await start_proxy(upstream="http://someone:pw-0123456789@127.0.0.1:9/", cassettes=cassettes)
    message = str(caught.value)
    assert "BENCH_API_KEY" in message and "--upstream-key-env" in message and "pw-0123456789" not in message
