"""Request starts spread over event-loop iterations, so that a burst of new requests cannot stall the streams already
forwarding.

aiohttp starts the handler of every request whose head came in the same poll of the sockets in the same loop
iteration, back to back. A handler's first step (reading the body, beginning the exchange, sending the upstream
request) costs ~0.1 ms of CPU, so 256 clients arriving together held the loop for tens of milliseconds without a
poll: every read of every other stream that arrived meanwhile waited, was stamped that late and reached its client
that late. That stall, not recording's work, was the proxy's added ITL tail (docs/proxy.md, "What it costs").

`StartSlices` lets the starts of one iteration run for a slice of `SLICE_NS`; the others wait, in arrival order, for
later iterations, and the loop polls its sockets before each. A lone request, or the first of an iteration, never
waits. A waiting start is woken for a later iteration along with as many others as fitted in the last slice (twice as
many if none was left over); one that finds the slice used up when it runs goes back to the head of the queue.

When the loop is behind (its iterations long with other work: a saturated or starved proxy), the slice grows to half
the last iteration: starts then get half the loop, as much as the forwarding, instead of waiting behind it for
hundreds of milliseconds, and a read still waits at most about as long as the iteration already made it wait.
"""

from __future__ import annotations

import asyncio
from collections import deque
from time import monotonic_ns

# The starts one loop iteration may run back to back before the rest wait for later iterations: a few (a start is
# ~0.1 ms on a 2-core VM), so that a burst delays the reads of other streams by well under a millisecond (a young
# garbage collection is ~0.1 ms, a middle one ~2 ms), while a queued start waits few iterations. 0.1 ms (one start
# per iteration) delayed the starts of a 256-request burst twice as much on a loaded machine.
SLICE_NS = 500_000


class StartSlices:
    """Admits request starts a slice of the loop at a time (one instance per proxy). A handler asks `turn()` and, while
    that gives a future, awaits it and asks `resume()`."""

    __slots__ = ("batch", "began", "chained", "fitted", "last_next", "missed", "scheduled", "slice_ns", "waiting")

    def __init__(self) -> None:
        self.began = 0  # when the current iteration's first start ran (0: none yet in this iteration)
        self.fitted = 0  # starts run in the current slice
        self.missed = 0  # woken starts that found the current slice used up (back at the head of the queue)
        self.batch = 1  # starts to wake for the next iteration
        self.scheduled = False  # `_next` is queued for the next iteration
        self.chained = False  # `_next` queued itself again: it runs in the iteration after its last run
        self.last_next = 0  # when `_next` last ran
        self.slice_ns = SLICE_NS
        self.waiting: deque[asyncio.Future[None]] = deque()

    def turn(self) -> asyncio.Future[None] | None:
        """None: start now. Otherwise a future to await before `resume()`."""
        if not self.waiting and self._fits():
            return None
        loop = asyncio.get_running_loop()
        turn = loop.create_future()
        self.waiting.append(turn)
        self._schedule(loop)
        return turn

    def resume(self) -> asyncio.Future[None] | None:
        """After a turn's future: None to start now, or a new future to await (the slice was used up meanwhile)."""
        if self._fits():
            return None
        turn = asyncio.get_running_loop().create_future()
        self.waiting.insert(self.missed, turn)  # behind the others that missed this slice: arrival order holds
        self.missed += 1
        return turn

    def _fits(self) -> bool:
        now = monotonic_ns()
        if not self.began:
            self.began = now
            self.fitted = 1
            self._schedule(asyncio.get_running_loop())
            return True
        if now - self.began < self.slice_ns:
            self.fitted += 1
            return True
        return False

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        if not self.scheduled:
            self.scheduled = True
            loop.call_soon(self._next)

    def _next(self) -> None:
        """At the next iteration (the loop has polled its sockets since): a new slice. Wakes the oldest waiting starts
        (they run in the iteration after this one): as many as fitted in the last slice, twice that if none missed."""
        now = monotonic_ns()
        # The last iteration's length, when this ran in it too: starts may take half of what it took.
        self.slice_ns = max(SLICE_NS, (now - self.last_next) // 2) if self.chained else SLICE_NS
        self.last_next = now
        self.batch = self.fitted if self.missed else max(1, self.fitted) * 2
        self.scheduled = False
        self.began = self.fitted = self.missed = 0
        woken = 0
        while self.waiting and woken < self.batch:
            turn = self.waiting.popleft()
            if not turn.done():  # a cancelled one: its client left while it waited
                turn.set_result(None)
                woken += 1
        self.chained = bool(self.waiting)
        if self.waiting:
            self._schedule(asyncio.get_running_loop())
