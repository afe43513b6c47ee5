"""Where exchanges are recorded: `Sink`, one cassette's pipeline (its writer, the task building records
(bench.proxy.persist) and the loop-lag monitor whose stalls each record carries), and `Recording`, the proxy's open
Sink (None for a proxy that records nothing: passthrough, replay without a log), which a rotation replaces.
"""

from __future__ import annotations

import asyncio
import logging
from time import monotonic_ns

from bench.core.cassette import CassetteWriter
from bench.proxy.lag import LoopLag
from bench.proxy.parts import SPILL_BYTES, body_limit, spill_safely
from bench.proxy.persist import Counts, Persister
from bench.proxy.recorder import Exchange

log = logging.getLogger("bench.proxy")


class Sink:
    """The persistence pipeline of one proxy: exchanges in, cassette records out, in the order they ended."""

    def __init__(self, writer: CassetteWriter, stats: Counts) -> None:
        self.writer = writer
        self.records = Persister(writer, stats)
        self.loop_lag: LoopLag | None = None  # set once the proxy's loop is timed (None where it cannot be)
        self.spill_bytes = SPILL_BYTES  # an exchange holding more body than this writes it in parts (bench.proxy.parts)
        # Exchanges with parts in this cassette that have not ended: their records must go here too, so a rotation
        # closes this cassette only once they have.
        self._open: set[Exchange] = set()
        self._none_open = asyncio.Event()
        self._none_open.set()

    def opened(self, ex: Exchange) -> None:
        """`ex` wrote its first part here."""
        self._open.add(ex)
        self._none_open.clear()

    def _ended(self, ex: Exchange) -> None:
        if ex.spill is not None:
            self._open.discard(ex)
            if not self._open:
                self._none_open.set()

    async def drained(self) -> None:
        """Every exchange with parts here has ended and every record is built: the cassette can be closed."""
        await self._none_open.wait()
        while (task := self.records.task) is not None:
            await asyncio.gather(task, return_exceptions=True)

    @property
    def pending(self) -> list[asyncio.Task[None]]:
        """What closing must wait for before the cassette is closed: the task still building records."""
        task = self.records.task
        return [task] if task is not None else []

    async def durable(self, ex: Exchange) -> None:
        """Write an exchange's record before its response ends: once the client has the whole answer, kill -9 of the
        proxy cannot lose it. Only the end of the response waits (every event has gone through)."""
        if ex.persisted:
            return
        end = monotonic_ns()
        ex.ended(self._lag(ex), durable=True)
        self._ended(ex)
        await self.records.durable(ex, end)

    def later(self, ex: Exchange) -> None:
        """Queue a finished exchange unless `durable` wrote it; nobody waits for it."""
        if ex.persisted:
            return
        end = monotonic_ns()
        ex.ended(self._lag(ex), durable=False)
        self._ended(ex)
        self.records.later(ex, end)

    def _lag(self, ex: Exchange) -> int | None:
        return self.loop_lag.since(ex.t0) if self.loop_lag is not None else None


class Recording:
    """The proxy's open cassette (`sink`; a rotation puts the next one there) and, for each exchange that has written
    parts of its body, the Sink of the cassette they are in: its record goes there too, however long it runs after a
    rotation (a rotation closes a cassette only once those have ended: `Sink.drained`)."""

    def __init__(self, sink: Sink | None = None) -> None:
        self.sink = sink
        self._bound: dict[Exchange, Sink] = {}

    @property
    def writer(self) -> CassetteWriter | None:
        return self.sink.writer if self.sink is not None else None

    def limit(self, ex: Exchange) -> tuple[int, bool]:
        """How much of `ex`'s body is held before it is written in parts (bench.proxy.parts.body_limit)."""
        return body_limit(ex, self.sink.spill_bytes if self.sink is not None else None)

    async def spill(self, ex: Exchange) -> int:
        """Write the reads `ex` holds as a part of its body; returns the bytes it still holds."""
        sink = self._bound.get(ex)
        if sink is None:
            assert self.sink is not None  # `limit` holds a body whole when nothing is recorded
            sink = self._bound[ex] = self.sink
            sink.opened(ex)
        return await spill_safely(ex, sink.writer)

    async def persist(self, ex: Exchange) -> None:
        """The exchange's record in the file before its response ends (see `Sink.durable`); nothing to do when
        nothing is recorded."""
        sink = self._bound.pop(ex, self.sink)
        if sink is not None:
            await sink.durable(ex)

    def finish(self, ex: Exchange) -> None:
        """Queue a finished exchange for the writer unless `persist` wrote it; the handler never waits for that."""
        sink = self._bound.pop(ex, self.sink)
        if sink is not None:
            sink.later(ex)


def writer_failed(path: object, why: str, unwritten: int) -> None:
    """Called by the cassette writer's thread, at once, when its file fails (disk full, file removed)."""
    log.error(
        "bench proxy: cannot record to %s: %s; %d exchange(s) not recorded so far; "
        "exchanges are still forwarded, not recorded",
        path,
        why,
        unwritten,
    )
