"""The proxy's own stalls: how long its event loop ran without looking at its sockets, per exchange.

A read that reaches the proxy while the loop is busy (building a record, collecting garbage, starting another
exchange) waits until the loop next polls its sockets, and is stamped that much late: the recorded gaps around it
are off by up to that stretch. `LoopLag` measures every stretch exactly, between two polls of the loop's selector
(two clock reads per loop iteration, no timer: a timer-based sampler on epoll reads up to 1 ms of false lag from
epoll's millisecond timeouts), and answers "the longest stretch since time t" for an exchange when it ends.

Stretches are kept as the peak of each ~1 ms bucket, in a list of decreasing peaks (a newer, larger peak makes the
older, smaller ones irrelevant for any later query): the longest stretch since t is the first kept peak at or after
t's bucket, found by bisection. The list holds the running maxima seen from the newest bucket backwards, a handful
in practice; it is capped all the same.
"""

from __future__ import annotations

import asyncio
import selectors
from bisect import bisect_left
from collections.abc import Mapping
from time import monotonic_ns
from typing import Any

BUCKET_SHIFT = 20  # buckets of 2**20 ns, ~1.05 ms
MAX_PEAKS = 4096


class LoopLag(selectors.BaseSelector):
    """Wraps a selector event loop's selector and times the loop's busy stretches between polls."""

    def __init__(self, inner: selectors.BaseSelector) -> None:
        self.inner = inner
        self.users = 0
        self._woke = monotonic_ns()
        self._bucket = self._woke >> BUCKET_SHIFT
        self._peak = 0  # longest stretch ending in the current bucket
        self._buckets: list[int] = []  # older buckets with a kept peak, increasing
        self._peaks: list[int] = []  # their peaks (ns), decreasing

    # -- the selector's interface, passed through --------------------------------------------------------------

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self.inner.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self.inner.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self.inner.modify(fileobj, events, data)

    def get_key(self, fileobj: Any) -> selectors.SelectorKey:
        return self.inner.get_key(fileobj)

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self.inner.get_map()

    def close(self) -> None:
        self.inner.close()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        now = monotonic_ns()
        busy = now - self._woke
        if now >> BUCKET_SHIFT != self._bucket:
            self._roll(now >> BUCKET_SHIFT)
        if busy > self._peak:
            self._peak = busy
        ready = self.inner.select(timeout)
        self._woke = monotonic_ns()
        return ready

    # -- the stalls -------------------------------------------------------------------------------------------

    def _roll(self, bucket: int) -> None:
        peak = self._peak
        if peak:
            peaks = self._peaks
            while peaks and peaks[-1] <= peak:
                peaks.pop()
                self._buckets.pop()
            peaks.append(peak)
            self._buckets.append(self._bucket)
            if len(peaks) > MAX_PEAKS:
                del peaks[0], self._buckets[0]
        self._bucket = bucket
        self._peak = 0

    def since(self, t_ns: int) -> int:
        """The longest busy stretch (ns) of the loop from time t_ns (monotonic_ns) to now, to ~1 ms of bucket."""
        i = bisect_left(self._buckets, t_ns >> BUCKET_SHIFT)
        older = self._peaks[i] if i < len(self._peaks) else 0
        return max(older, self._peak, monotonic_ns() - self._woke)


def install(loop: asyncio.AbstractEventLoop) -> LoopLag | None:
    """Time this loop's stalls (shared by every proxy on it); None on a loop without a selector (uvloop, Windows'
    proactor), where exchanges then carry no loop lag."""
    selector = getattr(loop, "_selector", None)
    if isinstance(selector, LoopLag):
        selector.users += 1
        return selector
    if not isinstance(selector, selectors.BaseSelector):
        return None
    lag = LoopLag(selector)
    lag.users = 1
    loop._selector = lag  # type: ignore[attr-defined]
    return lag


def uninstall(loop: asyncio.AbstractEventLoop, lag: LoopLag) -> None:
    lag.users -= 1
    if lag.users == 0 and getattr(loop, "_selector", None) is lag:
        loop._selector = lag.inner  # type: ignore[attr-defined]
