"""The proxy's own event-loop stalls, as each exchange sees them (bench.proxy.lag)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from time import monotonic_ns

import aiohttp

from bench.core.cassette import read_cassette
from bench.proxy import start_proxy
from bench.proxy.lag import BUCKET_SHIFT, LoopLag, install, uninstall
from tests.support.upstream import Upstream

STALL_S = 0.5  # far above a busy machine's scheduling stalls, which the loop also sees


async def _next_bucket() -> None:
    """Let the loop poll until the clock has moved into a later stall bucket."""
    start = monotonic_ns() >> BUCKET_SHIFT
    while monotonic_ns() >> BUCKET_SHIFT == start:
        await asyncio.sleep(0.001)


async def test_a_stall_is_seen_by_what_was_in_flight_and_not_by_what_started_after() -> None:
    loop = asyncio.get_running_loop()
    lag = install(loop)
    assert isinstance(lag, LoopLag)
    try:
        before = monotonic_ns()
        await _next_bucket()
        time.sleep(STALL_S)  # holds the loop: nothing else runs, no socket is polled
        # The loop's next poll sees the stall and files it under the bucket that poll falls in; yielding once lets
        # it run first, so the bucket waited out next is that one or a later one, however the clock is sliced.
        await asyncio.sleep(0)
        await _next_bucket()
        after = monotonic_ns()
        await _next_bucket()
        assert lag.since(before) >= STALL_S * 1e9
        assert lag.since(after) < STALL_S * 1e9
    finally:
        uninstall(loop, lag)


async def test_proxies_on_one_loop_share_the_timing_and_the_last_one_out_restores_the_selector() -> None:
    loop = asyncio.get_running_loop()
    original = loop._selector  # type: ignore[attr-defined]
    first, second = install(loop), install(loop)
    assert first is second is loop._selector  # type: ignore[attr-defined]
    assert first is not None
    uninstall(loop, first)
    assert loop._selector is first  # type: ignore[attr-defined]
    uninstall(loop, first)
    assert loop._selector is original  # type: ignore[attr-defined]


async def test_a_record_carries_the_stall_its_exchange_saw(upstream: Upstream, cassettes: Path) -> None:
    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    loop = asyncio.get_running_loop()

    def stall() -> None:
        time.sleep(STALL_S)

    async with aiohttp.ClientSession() as session:
        async with session.get(proxy.url + "/v1/models") as resp:
            await resp.read()
        # The upstream waits before it answers: the loop stalls while this exchange is in flight.
        loop.call_later(0.1, stall)
        body = {"model": "test-slow-headers", "messages": [], "x_stall_s": 0.5}
        async with session.post(proxy.url + "/v1/chat/completions", json=body) as resp:
            await resp.read()
    await proxy.close()
    assert proxy.cassette_path is not None
    _, records = read_cassette(proxy.cassette_path)
    quiet, stalled = (r.timing.loop_lag_us for r in records)
    assert stalled >= STALL_S * 1e6
    assert quiet < STALL_S * 1e6
