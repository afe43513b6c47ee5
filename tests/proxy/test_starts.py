"""Request starts spread over loop iterations (bench.proxy.starts): a burst runs a slice per iteration, in arrival
order."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from bench.core.cassette import CassetteReader
from bench.proxy import start_proxy, starts
from bench.proxy.starts import SLICE_NS, StartSlices
from tests.proxy.test_arrival import chat_request
from tests.support.upstream import Upstream


class Iterations:
    """Counts the event loop's iterations: a callback that queues itself again runs once per iteration."""

    def __init__(self, clock: list[int], other_ns: int) -> None:
        self.n = 0
        self.clock = clock
        self.other_ns = other_ns  # the loop's other work in each iteration, on the fake clock
        self.loop = asyncio.get_running_loop()
        self.handle = self.loop.call_soon(self._tick)

    def _tick(self) -> None:
        self.n += 1
        self.clock[0] += self.other_ns
        self.handle = self.loop.call_soon(self._tick)

    def stop(self) -> None:
        self.handle.cancel()


async def _burst(
    slices: StartSlices, count: int, cost_ns: int, clock: list[int], other_ns: int = 0
) -> list[tuple[int, int]]:
    """`count` starts arriving in one iteration, each taking `cost_ns` of the (fake) clock, each iteration `other_ns`
    of other work: (arrival, iteration) of each start, in the order they ran."""
    iterations = Iterations(clock, other_ns)
    started: list[tuple[int, int]] = []

    async def start(i: int) -> None:
        turn = slices.turn()
        while turn is not None:
            await turn
            turn = slices.resume()
        started.append((i, iterations.n))
        clock[0] += cost_ns

    tasks = [asyncio.get_running_loop().create_task(start(i)) for i in range(count)]
    await asyncio.gather(*tasks)
    iterations.stop()
    return started


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    now = [1_000_000]
    monkeypatch.setattr(starts, "monotonic_ns", lambda: now[0])
    return now


async def test_starts_that_each_fill_a_slice_run_one_per_iteration_in_arrival_order(clock: list[int]) -> None:
    started = await _burst(StartSlices(), 12, SLICE_NS, clock)
    assert [i for i, _ in started] == list(range(12))
    iterations = [n for _, n in started]
    assert len(set(iterations)) == 12  # never two in one iteration: the loop polls its sockets between them


async def test_as_many_starts_run_per_iteration_as_fit_in_a_slice(clock: list[int]) -> None:
    started = await _burst(StartSlices(), 20, SLICE_NS * 2 // 5, clock)
    assert [i for i, _ in started] == list(range(20))
    per_iteration = Counter(n for _, n in started)
    assert max(per_iteration.values()) == 3  # at 0, 0.4 and 0.8 of a slice; the one at 1.2 waits
    assert sum(v == 3 for v in per_iteration.values()) >= 4  # the woken ones fill their slices too


async def test_a_loop_behind_with_other_work_gives_starts_half_of_each_iteration(clock: list[int]) -> None:
    quiet = Counter(n for _, n in await _burst(StartSlices(), 60, SLICE_NS // 2, clock))
    busy = Counter(n for _, n in await _burst(StartSlices(), 60, SLICE_NS // 2, clock, other_ns=8 * SLICE_NS))
    assert max(quiet.values()) == 2
    # Iterations of 8 slices of other work: starts get about as long as that (16 of them), not one slice.
    assert max(busy.values()) >= 12
    assert len(busy) < len(quiet) / 2


async def test_cheap_starts_share_an_iteration_and_a_lone_start_never_waits(clock: list[int]) -> None:
    started = await _burst(StartSlices(), 12, SLICE_NS // 20, clock)
    assert [i for i, _ in started] == list(range(12))
    assert len({n for _, n in started}) == 1
    await asyncio.sleep(0)
    await asyncio.sleep(0)  # a later iteration: a new slice
    assert StartSlices().turn() is None


async def test_a_start_cancelled_while_it_waits_does_not_hold_up_the_others(clock: list[int]) -> None:
    slices = StartSlices()
    assert slices.turn() is None
    clock[0] += SLICE_NS  # the first start used the iteration's slice
    gone = slices.turn()
    assert gone is not None
    gone.cancel()  # its client left
    waiting = slices.turn()
    assert waiting is not None
    await asyncio.wait_for(waiting, timeout=5)


class Held(StartSlices):
    """Start slices that keep every start waiting until the test says: it decides when a start runs."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = asyncio.Event()
        self.turns: list[asyncio.Future[None]] = []

    def turn(self) -> asyncio.Future[None] | None:
        held = asyncio.get_running_loop().create_future()
        self.turns.append(held)
        self.asked.set()
        return held

    def resume(self) -> asyncio.Future[None] | None:
        return None


async def test_a_client_that_leaves_while_its_start_waits_is_recorded_as_client_disconnected(
    upstream: Upstream, cassettes: Path
) -> None:
    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    held = Held()
    proxy.handle.starts = held
    host, port = proxy.url.removeprefix("http://").split(":")
    head, body = chat_request({"stream": True})
    _, writer = await asyncio.open_connection(host, int(port))
    writer.write(head + body)
    await asyncio.wait_for(held.asked.wait(), timeout=30)  # its start is waiting its turn
    writer.close()  # and its client leaves
    await writer.wait_closed()
    for _ in range(600):  # the proxy sees the connection drop within ms; 30 s on a starved machine
        if proxy.stats.client_disconnects and proxy.in_flight == 0:
            break
        await asyncio.sleep(0.05)
    await proxy.close()
    assert held.turns[0].cancelled()
    assert proxy.cassette_path is not None
    reader = CassetteReader(proxy.cassette_path)
    records = list(reader)
    assert reader.end is not None
    assert [(r.outcome, r.error) for r in records] == [
        ("client_disconnected", "the client went away while its request waited to start")
    ]
    assert records[0].request.body == body and records[0].response.status is None
    assert proxy.stats.client_disconnects == 1 and reader.end.client_disconnects == 1
    assert upstream.requests == []  # it never reached the upstream
