"""Finished exchanges into cassette records, without stalling the forwarding of the others.

Building a record (first token, fingerprint, deltas), redacting and packing it is Python work on the event loop,
0.1-0.3 ms per exchange. Done by each handler as its exchange ended, a burst of exchanges ending together held the
loop for milliseconds, and every read of every other stream that arrived meanwhile waited, and was stamped late.
Here one task builds every record, in steps of tens of microseconds, and yields to the loop whenever a slice of
`SLICE_NS` is used up: the loop polls its sockets between slices, so a read waits behind at most one slice, however
many exchanges end together. Compressing and writing happen in the cassette writer's thread (zstd releases the GIL).

kill -9 safety: a forwarded response ends only once its record is in the file. `persist` returns when the writer
has written it; only then does the handler end the response.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Iterator
from time import monotonic_ns
from typing import Protocol

from bench.core.cassette import CassetteWriter
from bench.core.cassette.writer import Packed, RecordUnwritten, WriterClosed
from bench.core.fingerprint import Undecided, canonical_body, canonical_text_fast, fingerprint_with, text_of
from bench.proxy.recorder import Exchange

log = logging.getLogger("bench.proxy")

# Record work per loop iteration before yielding. One step (one read parsed, the fingerprint, the redaction) is not cut,
# so a slice can exceed this by one step.
SLICE_NS = 30_000
# Built records handed to the writer at once, at most: a burst of exchanges ending together is written in blocks of
# this many, not one block per record (each block costs the writer a wake-up, a flush and a write).
MAX_HANDOVER = 64


class Counts(Protocol):
    exchanges: int  # records handed to the cassette writer
    lost: int  # finished exchanges the cassette writer could not take (its file failed) or that failed to build


_Job = tuple[Exchange, int, "asyncio.Future[None] | None"]


class Persister:
    """One task that turns finished exchanges into records, in order, a slice at a time."""

    def __init__(self, writer: CassetteWriter, stats: Counts) -> None:
        self.writer = writer
        self.stats = stats
        self.seq = 0
        self._jobs: deque[_Job] = deque()
        self.task: asyncio.Task[None] | None = None

    def _submit(self, ex: Exchange, end: int, done: asyncio.Future[None] | None) -> None:
        self.seq += 1
        ex.numbered(self.seq)
        self.stats.exchanges += 1
        self._jobs.append((ex, end, done))
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._run())

    def later(self, ex: Exchange, end: int) -> None:
        """Record an exchange that has ended; nobody waits for it."""
        self._submit(ex, end, None)

    async def durable(self, ex: Exchange, end: int) -> None:
        """Record an exchange and return once its record is in the file (or is lost, counted)."""
        # Settled by the writer's thread once the record is in the file, or by `_run` if it is lost. If this handler
        # is cancelled meanwhile (its client left), the record is still written: the job stays.
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._submit(ex, end, done)
        try:
            await done
        except RecordUnwritten:
            pass  # queued, then the file failed: the writer counts it (stats.unwritten) and said so at once
        except WriterClosed as exc:
            self._lost(str(exc))

    async def _run(self) -> None:
        try:
            start = monotonic_ns()
            packed: list[Packed] = []  # built, not yet handed to the writer, with who waits for each
            waiting: list[asyncio.Future[None] | None] = []
            while self._jobs:
                ex, end, done = self._jobs.popleft()
                try:
                    for _ in self._steps(ex, end, packed):
                        if monotonic_ns() - start > SLICE_NS:
                            await asyncio.sleep(0)
                            start = monotonic_ns()
                    waiting.append(done)
                except WriterClosed as exc:  # its parts could not all be written: the record would be wrong
                    del packed[len(waiting) :]
                    self._lost(str(exc))
                    if done is not None and not done.done():
                        done.set_result(None)
                except Exception:  # a bug on odd bytes must cost one record, not every later one
                    log.exception("bench proxy: could not build the record of exchange x%d", ex.seq)
                    del packed[len(waiting) :]
                    self._lost(None)
                    if done is not None and not done.done():
                        done.set_result(None)  # lost: the response ends all the same
                # Records go to the writer together: its thread wakes, compresses and flushes once for them all.
                if packed and (not self._jobs or len(packed) >= MAX_HANDOVER):
                    await self._hand_over(packed, waiting)
                    packed, waiting = [], []
        finally:
            self.task = None

    async def _hand_over(self, packed: list[Packed], waiting: list[asyncio.Future[None] | None]) -> None:
        try:
            last = await self.writer.put_packed(packed)
        except WriterClosed as exc:
            for done in waiting:
                self._lost(str(exc))
                if done is not None and not done.done():
                    done.set_result(None)
            return
        for ticket, done in enumerate(waiting, last - len(waiting) + 1):
            if done is not None and not done.done():
                self.writer.when_written(ticket, done)

    def _steps(self, ex: Exchange, end: int, packed: list[Packed]) -> Iterator[None]:
        """Build, redact and pack one record into `packed`, yielding between steps (with a client's key to scrub
        from every read, the redaction is the longest step)."""
        ex.settle_stream()
        yield
        yield from ex.identify_steps()
        request = ex.request
        if not request.fp:
            text: bytes | Undecided | None = canonical_text_fast(request.body)
            if isinstance(text, Undecided):  # where orjson could differ: json's path, in two steps of ~15 us
                canon = canonical_body(request.body)
                yield
                text = text_of(canon)
            else:
                yield
            ex.fingerprinted(fingerprint_with(request.method, request.path, request.query, request.body, text))
            yield
        record = ex.to_record(end)
        yield
        sp = ex.spill
        if sp is not None and sp.failed:
            raise WriterClosed("the cassette failed while the body was written in parts")
        spilled = (0, False) if sp is None else (sp.bytes, sp.scrubber.scrubbed)
        for data in self.writer.packing(record, *spilled):
            if data is None:
                yield
            else:
                packed.append(data)
        # The packed record holds the body now: the reads are let go at once rather than when the handler ends
        # (a large answer is not held twice while it waits for the writer).
        ex.release_body()

    def _lost(self, why: str | None) -> None:
        self.stats.exchanges -= 1
        self.stats.lost += 1
        if why is not None and self.stats.lost == 1 and self.writer.stats.failure is None:
            # Disk full or file removed: keep serving (the clients are not at fault), say it once.
            log.error("bench proxy: cannot record: %s; exchanges are forwarded but not recorded", why)
