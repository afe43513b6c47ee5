"""One level of a load run: open-loop arrivals on a schedule, or a fixed number of requests kept in flight.

Open loop: each arrival is sent at its due time whether or not earlier ones were answered (a task each; nothing
waits for an answer), unless `max_concurrency` requests are already in flight, when it waits for a slot. The
generator stamps how late it sent each one (its start against its due time): the measure of whether it kept up.
Closed loop: `n` workers each send the next item when their last one is answered.
A level stops sending at its end (duration, count, or the workload's end), then waits up to `drain_s` for what is
still in flight; what is still running then is cancelled (the proxy records it as the client going away).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from bench.catalog.loadgen.levels import MEASURE, Bounds, Level
from bench.catalog.loadgen.sender import Sent
from bench.catalog.loadgen.work import Work

Send = Callable[[Work, Mapping[str, str], Sent], Coroutine[Any, Any, Sent]]


@dataclass
class LevelRun:
    """What the generator saw of one level: every arrival it sent, with its own clock."""

    level: Level
    arrival: str | None = None  # open loop: constant, poisson, gamma or replay
    start: float = 0.0
    stop_sending: float = 0.0
    end: float = 0.0
    sent: list[Sent] = field(default_factory=list)
    cancelled: int = 0  # still in flight when the drain time ran out
    exhausted: bool = False  # the workload ran out before the level's end

    def measured(self) -> list[Sent]:
        return [s for s in self.sent if s.phase == MEASURE]

    def request_rate(self) -> float:
        """Completed measured requests over the span from the first one's start to the last one's end (vLLM's
        request throughput over a benchmark's duration); 0 when none completed."""
        done = [s for s in self.measured() if s.ok]
        if not done:
            return 0.0
        span = max(s.end for s in done) - min(s.start for s in done)
        return len(done) / span if span > 0 else 0.0


def tags_for(level: Level, phase: str, at_s: float | None = None, late_s: float | None = None) -> dict[str, str]:
    tags = {"Level": str(level.index), "Load": level.label, "Phase": phase}
    if at_s is not None and late_s is not None:
        tags["At"] = str(round(at_s * 1e6))
        tags["Late"] = str(max(0, round(late_s * 1e6)))
    return tags


async def _drain(tasks: set[asyncio.Task[Any]], run: LevelRun, drain_s: float | None) -> None:
    """Wait up to `drain_s` for the tasks (None: until they end), then cancel what is left."""
    if tasks:
        _, pending = await asyncio.wait(tasks, timeout=drain_s)
        for task in pending:
            task.cancel()
        run.cancelled = len(pending)
        if pending:
            await asyncio.wait(pending)
    run.end = time.monotonic()


async def run_open(
    level: Level,
    bounds: Bounds,
    due: Iterator[float],
    work: Iterator[Work],
    send: Send,
    *,
    max_concurrency: int | None,
    drain_s: float,
    stop: asyncio.Event,
    length_s: float | None = None,
    arrival: str | None = None,
) -> LevelRun:
    """Send one item at each due time (seconds from the level's start) until the duration, count or work runs out.
    `length_s` is the schedule's length when the caller knows it (a count of arrivals, a replayed recording)."""
    run = LevelRun(level, arrival)
    slots = asyncio.Semaphore(max_concurrency) if max_concurrency else None
    tasks: set[asyncio.Task[Sent]] = set()
    dues = list(itertools.islice(due, bounds.requests)) if bounds.requests is not None else None
    schedule = iter(dues) if dues is not None else due
    length = length_s or (bounds.duration_s if dues is None else (dues[-1] if dues else 0.0))
    loop = asyncio.get_running_loop()
    t0 = run.start = time.monotonic()
    for index, at in enumerate(schedule):
        if (bounds.duration_s is not None and at >= bounds.duration_s) or stop.is_set():
            break
        item = next(work, None)
        if item is None:
            run.exhausted = True
            break
        wait = t0 + at - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        if slots is not None:
            await slots.acquire()
        now = time.monotonic()
        late = now - (t0 + at)
        if dues is not None and length_s is None:
            phase = bounds.phase_by_count(index, len(dues))
        else:
            phase = bounds.phase_by_time(at, length or 0.0)
        sent = Sent(phase=phase, start=now, late_s=late)
        run.sent.append(sent)
        task = loop.create_task(send(item, tags_for(level, phase, at, late), sent))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        if slots is not None:
            task.add_done_callback(_releaser(slots))
    run.stop_sending = time.monotonic()
    await _drain(tasks, run, drain_s)
    return run


def _releaser(slots: asyncio.Semaphore) -> Callable[[asyncio.Task[Sent]], None]:
    def release(_task: asyncio.Task[Sent]) -> None:
        slots.release()

    return release


async def run_closed(
    level: Level,
    bounds: Bounds,
    work: Iterator[Work],
    send: Send,
    *,
    drain_s: float,
    stop: asyncio.Event,
) -> LevelRun:
    """Keep `level.concurrency` items in flight: each worker sends the next item when its last one is answered."""
    run = LevelRun(level)
    counter = itertools.count()
    t0 = run.start = time.monotonic()
    deadline = t0 + bounds.duration_s if bounds.duration_s is not None else None

    async def worker() -> None:
        while not stop.is_set():
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return
            index = next(counter)
            if bounds.requests is not None and index >= bounds.requests:
                return
            item = next(work, None)
            if item is None:
                run.exhausted = True
                return
            if bounds.requests is not None:
                phase = bounds.phase_by_count(index, bounds.requests)
            else:
                phase = bounds.phase_by_time(now - t0, bounds.duration_s or 0.0)
            sent = Sent(phase=phase, start=now)
            run.sent.append(sent)
            await send(item, tags_for(level, phase), sent)

    loop = asyncio.get_running_loop()
    workers: set[asyncio.Task[Any]] = {loop.create_task(worker()) for _ in range(level.concurrency)}
    # Workers start nothing after the deadline; the drain bounds how long the last answers may take. A level bounded
    # by a count ends when its requests do (each is bounded by the request timeout).
    await _drain(workers, run, bounds.duration_s + drain_s if bounds.duration_s is not None else None)
    run.stop_sending = run.end
    return run
