"""The idle timeout's one shared timer (bench.proxy.watchdog), on a fake clock: the sweep is called as its timer
would."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from bench.proxy import watchdog
from bench.proxy.watchdog import IdleSweep
from tests.support.records import live_exchange

SECOND = 1_000_000_000


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    now = [100 * SECOND]
    monkeypatch.setattr(watchdog, "monotonic_ns", lambda: now[0])
    return now


@pytest.fixture
async def tasks() -> AsyncIterator[list[asyncio.Task[None]]]:
    made: list[asyncio.Task[None]] = []
    yield made
    for task in made:
        task.cancel()
    await asyncio.gather(*made, return_exceptions=True)


async def _waiting() -> None:
    await asyncio.Event().wait()


def swept(sweep: IdleSweep) -> None:
    """One sweep, as its timer would run it (the timer itself is cancelled: the test's clock is not the loop's)."""
    if sweep.handle is not None:
        sweep.handle.cancel()
    sweep.sweep()


def forwarding(tasks: list[asyncio.Task[None]]) -> asyncio.Task[None]:
    """A task standing for a handler waiting on its upstream."""
    task = asyncio.get_running_loop().create_task(_waiting())
    tasks.append(task)
    return task


async def test_only_exchanges_silent_for_the_limit_are_cancelled_and_the_timer_follows_the_next(
    clock: list[int], tasks: list[asyncio.Task[None]]
) -> None:
    sweep = IdleSweep(2.0)
    silent = sweep.watch(live_exchange(clock[0]), forwarding(tasks))
    reading = sweep.watch(live_exchange(clock[0]), forwarding(tasks))
    armed = sweep.handle
    assert armed is not None  # one timer, set when the first exchange joined
    clock[0] += SECOND
    reading.ex.times.append(clock[0])  # a read after 1 s: its silence counts from here
    clock[0] += SECOND  # 2 s after both began
    swept(sweep)
    assert silent.expired and silent.task.cancelling() and silent not in sweep.live
    assert not reading.expired and not reading.task.cancelling() and reading in sweep.live
    assert sweep.handle is not None and sweep.handle is not armed
    loop = asyncio.get_running_loop()
    assert sweep.handle.when() - loop.time() == pytest.approx(1.0, abs=0.1)  # due 2 s after its read
    sweep.handle.cancel()
    await asyncio.sleep(0)  # the cancellation reaches the silent task
    assert silent.task.cancelled() and not reading.task.done()


async def test_a_start_adds_no_timer_and_a_stopped_exchange_is_never_cancelled(
    clock: list[int], tasks: list[asyncio.Task[None]]
) -> None:
    sweep = IdleSweep(1.0)
    watches = [sweep.watch(live_exchange(clock[0]), forwarding(tasks)) for _ in range(50)]
    armed = sweep.handle
    assert armed is not None
    for _ in range(10):
        sweep.watch(live_exchange(clock[0]), forwarding(tasks)).stop()
        assert sweep.handle is armed
    for w in watches:
        w.stop()
    clock[0] += 5 * SECOND
    swept(sweep)
    assert not any(w.expired or w.task.cancelling() for w in watches)
    assert len(sweep.live) == 0 and sweep.handle is None  # nothing in flight: no timer left behind
    armed.cancel()


async def test_absorb_undoes_only_the_cancellation_the_limit_caused(
    clock: list[int], tasks: list[asyncio.Task[None]]
) -> None:
    sweep = IdleSweep(1.0)
    mine = sweep.watch(live_exchange(clock[0]), forwarding(tasks))
    other = sweep.watch(live_exchange(clock[0] + 2 * SECOND), forwarding(tasks))
    other.task.cancel()  # cancelled for another reason (its client left)
    clock[0] += SECOND
    swept(sweep)
    assert mine.absorb() and mine.task.cancelling() == 0
    assert not other.absorb() and other.task.cancelling() == 1
    assert sweep.handle is not None
    sweep.handle.cancel()


async def test_a_wait_on_the_proxys_own_writer_is_not_silence(
    clock: list[int], tasks: list[asyncio.Task[None]]
) -> None:
    sweep = IdleSweep(1.0)
    waiting = sweep.watch(live_exchange(clock[0]), forwarding(tasks))
    waiting.pause()  # its record is being written: it reads nothing from the upstream meanwhile
    clock[0] += 5 * SECOND
    swept(sweep)
    assert not waiting.expired and waiting in sweep.live
    waiting.resume()
    clock[0] += SECOND // 2
    swept(sweep)
    assert not waiting.expired  # its silence counts from the resume, not from its last read 5.5 s ago
    clock[0] += SECOND // 2
    swept(sweep)
    assert waiting.expired and waiting.task.cancelling()
    assert sweep.handle is None  # nothing left in flight


def test_a_sweep_outliving_its_event_loop_sets_its_timer_on_the_next() -> None:
    sweep = IdleSweep(60.0)
    loops: list[asyncio.AbstractEventLoop | None] = []

    async def join() -> None:
        task = asyncio.current_task()
        assert task is not None
        sweep.watch(live_exchange(0), task).stop()
        loops.append(sweep.loop)

    asyncio.run(join())
    asyncio.run(join())  # the first loop's timer is gone with its loop: a timer on this one, or no limit here
    assert loops[0] is not None and loops[1] is not None and loops[0] is not loops[1]
