"""The upstream-silence limit (`--idle-timeout`): one shared timer for every exchange in flight.

aiohttp's `sock_read` timeout re-arms a timer on every read, a per-chunk cost. The reads' arrival times are recorded
anyway, so silence can be judged from the last of them when a timer fires. A timer per exchange still cost ~8 us of
every request's start on a 2-core VM (the timer handle made, pushed on the loop's heap, cancelled at the end and swept
off it later), paid in the burst of starts that sets the proxy's added tail. `IdleSweep` keeps one timer for all of
them: a start only adds its exchange to a set, and the timer fires at the earliest moment any exchange in flight could
have been silent for the limit, looks at each one's last read, cancels those silent that long and sets itself for the
next earliest. While upstreams answer, that is about once per limit (seconds to minutes), over the exchanges in flight.

An exchange counts from its last read, its response headers, its upstream request or its arrival, whichever is the
latest it has. While it waits on the proxy's own cassette writer (a part of a large body, the record at the end) it
does not read the upstream: that wait is `paused`, never counts as silence, and its silence counts from the pause's
end at the earliest. One that joins while the timer is set for later than its own limit is looked at when the timer
fires: late by at most how long its start waited its turn (bench.proxy.starts), milliseconds against a limit of seconds.
"""

from __future__ import annotations

import asyncio
from time import monotonic_ns
from typing import Any

from bench.proxy.recorder import Exchange


class Watch:
    """One exchange under the silence limit: `expired` once the sweep has cancelled its task for it."""

    __slots__ = ("ex", "expired", "paused", "resumed", "sweep", "task")

    def __init__(self, sweep: IdleSweep, ex: Exchange, task: asyncio.Task[Any]) -> None:
        self.sweep = sweep
        self.ex = ex
        self.task = task
        self.expired = False
        self.paused = False
        self.resumed = 0  # when the last pause ended

    def last(self) -> int:
        """When the upstream's silence began, as far as the limit is concerned."""
        ex = self.ex
        last = ex.times[-1] if ex.times else (ex.headers_at or ex.sent_upstream or ex.t0)
        return max(last, self.resumed)

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False
        self.resumed = monotonic_ns()

    def absorb(self) -> bool:
        """In an `except CancelledError`: True if the silence limit caused it (and the cancellation is undone)."""
        if not self.expired:
            return False
        self.task.uncancel()
        return True

    def stop(self) -> None:
        self.sweep.live.discard(self)


class IdleSweep:
    """The silence limit of every exchange in flight on one proxy, with one timer (see the module's docstring)."""

    __slots__ = ("handle", "idle_ns", "live", "loop")

    def __init__(self, idle_s: float) -> None:
        self.idle_ns = int(idle_s * 1e9)
        self.live: set[Watch] = set()
        self.handle: asyncio.TimerHandle | None = None
        self.loop: asyncio.AbstractEventLoop | None = None  # the timer's loop

    def watch(self, ex: Exchange, task: asyncio.Task[Any]) -> Watch:
        watch = Watch(self, ex, task)
        self.live.add(watch)
        if self.handle is None or self.loop is not asyncio.get_running_loop():  # none yet, or one on a closed loop
            self._arm(watch.last() + self.idle_ns)
        return watch

    def _arm(self, due_ns: int) -> None:
        delay = max(0, due_ns - monotonic_ns()) / 1e9
        self.loop = loop = asyncio.get_running_loop()
        self.handle = loop.call_later(delay, self.sweep)

    def sweep(self) -> None:
        """Cancel the exchanges silent for the limit; set the timer for the next one that could be."""
        self.handle = None
        idle = self.idle_ns
        now = monotonic_ns()
        silent: list[Watch] = []
        soonest = 0
        for watch in self.live:
            # A paused one is looked at again a whole limit from now at the latest (its pause may end any time).
            due = now + idle if watch.paused else watch.last() + idle
            if due <= now:
                silent.append(watch)
            elif not soonest or due < soonest:
                soonest = due
        for watch in silent:
            self.live.discard(watch)
            watch.expired = True
            watch.task.cancel()
        if soonest:
            self._arm(soonest)
