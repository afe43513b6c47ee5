from __future__ import annotations

import asyncio
import os
from pathlib import Path

import aiohttp
import pytest

from bench.core.cassette import CassetteReader
from bench.core.cassette.records import RunMeta
from bench.core.errors import BenchError
from bench.proxy import start_proxy
from bench.proxy.identity import identity_headers
from tests.proxy.conftest import MESSAGES
from tests.support.upstream import Upstream


async def test_close_cuts_exchanges_still_running_after_the_grace_period(upstream: Upstream, cassettes: Path) -> None:
    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes, run=RunMeta(id="r9"))
    body = {"model": "test-stall", "messages": MESSAGES, "stream": True, "x_stall_s": 30}
    async with aiohttp.ClientSession() as session:
        resp = await session.post(proxy.url + "/v1/chat/completions", json=body)
        await resp.content.readany()
        await proxy.close(interrupted=True, grace=0.2)
        resp.close()
    assert proxy.cassette_path is not None
    reader = CassetteReader(proxy.cassette_path)
    records = list(reader)
    assert reader.header.run == RunMeta(id="r9") and reader.end is not None
    assert reader.end.interrupted is True and reader.end.cut_by_shutdown == 1
    assert records[0].outcome == "client_disconnected" and "shut down" in records[0].error
    for _ in range(50):
        if upstream.requests[-1].disconnected:
            break
        await asyncio.sleep(0.05)
    assert upstream.requests[-1].disconnected


async def test_a_closed_proxy_refuses_connections(upstream: Upstream, cassettes: Path) -> None:
    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes, mode="passthrough")
    await proxy.close()
    await proxy.close()  # idempotent
    async with aiohttp.ClientSession() as session:
        try:
            await session.get(proxy.url + "/v1/models")
        except aiohttp.ClientConnectionError:
            pass
        else:
            raise AssertionError("the proxy still accepts connections")


def test_identity_headers_skip_secret_ones() -> None:
    headers = [("X-Request-Id", "r1"), ("openai-organization", "org-secret"), ("OpenAI-Version", "2020"), ("Date", "x")]
    assert identity_headers(headers, frozenset({"openai-organization"})) == {
        "x-request-id": "r1",
        "openai-version": "2020",
    }


async def test_a_failed_cassette_writer_does_not_stop_forwarding(
    upstream: Upstream, cassettes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    writer = proxy.recording.writer
    assert writer is not None
    # A full disk: every write to the cassette now fails with ENOSPC.
    full = os.open("/dev/full", os.O_WRONLY)
    os.dup2(full, writer._fd)
    os.close(full)
    async with aiohttp.ClientSession() as session:
        for _ in range(2):
            async with session.get(proxy.url + "/v1/models") as resp:
                assert resp.status == 200
    await proxy.close()
    assert proxy.stats.lost == 2 and proxy.stats.exchanges == 0


async def test_a_busy_port_is_a_one_line_error(upstream: Upstream, cassettes: Path) -> None:
    first = await start_proxy(upstream=upstream.url, cassettes=cassettes, mode="passthrough")
    port = int(first.url.rsplit(":", 1)[1])
    with pytest.raises(BenchError, match=f"cannot listen on 127.0.0.1:{port}"):
        await start_proxy(upstream=upstream.url, cassettes=cassettes, port=port)
    await first.close()
    assert not cassettes.exists()  # no cassette left behind by the proxy that could not start
