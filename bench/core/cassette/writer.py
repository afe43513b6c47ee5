"""Append-only, crash-safe cassette writer (format v2, docs/cassette-format.md).

Layout: the header alone in a first zstd frame (with zstd's checksum), then the records, each msgpack-packed by the
caller's thread (cheap, and it freezes the record), framed with its sequence number and checksum and compressed by one
writer thread, with a zstd block flush after each batch of records. A decompressor reads every flushed block of a
file cut short by kill -9, so only records still queued are lost. A zstd frame holds up to SEGMENT_BYTES of records
and then a new one starts: one stream compresses short exchanges ~3x better than a frame per exchange (envelopes
repeat), and a reader resumes at the next frame after damage that breaks the stream. When the cassette is closed it
is recompressed at a higher level (`compact`), where the size allows it to be done in a few seconds.

Queue policy: the queue is bounded in bytes (`max_queue_bytes`). A full queue never drops a record and never blocks
the event loop: `put_async` waits for room in a worker thread, so only the coroutine that finished the exchange
waits, and the wait is counted in `stats.queue_full_waits`. `put_durable` also waits until the record's block has
been written to the file (the OS has it: kill -9 cannot lose it, only a crash of the machine could).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec
import zstandard

from bench import __version__
from bench.core.cassette import columns, compact, repair
from bench.core.cassette.envelope import prefix
from bench.core.cassette.format import SEGMENT_BYTES, SUFFIX
from bench.core.cassette.records import (
    End,
    Exchange,
    Header,
    Part,
    RunMeta,
    ServerInfo,
    Settings,
    Shard,
    encode,
    encode_exchange,
    encode_part,
)
from bench.core.cassette.redact import Redactor
from bench.core.errors import BenchError
from bench.core.fingerprint import FINGERPRINT_VERSION


@dataclass
class WriterStats:
    records: int = 0
    raw_bytes: int = 0
    written_bytes: int = 0
    queue_full_waits: int = 0
    unwritten: int = 0  # records accepted but never written: queued when the file failed (disk full, removed)
    failure: str | None = None  # why the file failed, in words


# A record as queued: msgpack without its arrival times, and the times (or None).
Packed = tuple[bytes, list[int] | None]


def _size(item: Packed) -> int:
    return len(item[0]) + (4 * len(item[1]) if item[1] is not None else 0)


class WriterClosed(RuntimeError):
    pass


class RecordUnwritten(WriterClosed):
    """The record was queued, then the file failed before it was written: it is counted in `stats.unwritten`."""


def new_cassette_path(directory: Path, prefix: str = "rec") -> Path:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    base = directory / f"{prefix}-{stamp}-{os.getpid()}"
    path = base.with_suffix(SUFFIX)
    n = 1
    while path.exists():
        path = Path(f"{base}-{n}{SUFFIX}")
        n += 1
    return path


def _wake(waiters: list[tuple[int, asyncio.AbstractEventLoop, asyncio.Future[None]]], error: Exception | None) -> None:
    """Settle `put_durable` waiters from the writer thread: one call into each event loop per batch."""
    by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
    for _, loop, future in waiters:
        by_loop.setdefault(loop, []).append(future)
    for loop, futures in by_loop.items():
        with contextlib.suppress(RuntimeError):  # that loop is already closed: nobody waits any more
            loop.call_soon_threadsafe(_settle, futures, error)


def _settle(futures: list[asyncio.Future[None]], error: Exception | None) -> None:
    for future in futures:
        if not future.done():  # a cancelled waiter (its client left) needs nothing
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)


def _header_frame(
    level: int,
    settings: Settings,
    run: RunMeta,
    server: ServerInfo | msgspec.UnsetType,
    shard: Shard | msgspec.UnsetType,
) -> tuple[bytes, bytes]:
    """The header record, and the file's first bytes: its own checksummed frame and that frame's repair frame."""
    now = dt.datetime.now(dt.UTC)
    header = encode(
        Header(
            bench_version=__version__,
            fingerprint_version=FINGERPRINT_VERSION,
            created=now.isoformat(),
            created_us=int(now.timestamp() * 1e6),
            settings=settings,
            run=run,
            server=server,
            shard=shard,
        )
    )
    first = zstandard.ZstdCompressor(level=level, write_checksum=True).compress(header)
    return header, first + repair.repair_frame(first)


def _write_fd(fd: int, data: bytes) -> None:
    out = memoryview(data)
    while out:
        n = os.write(fd, out)
        out = out[n:]


def _create(path: Path, first: bytes) -> int:
    """A new cassette holding `first`, open for appending; never one that exists, and no file left if it fails."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
    except OSError as exc:
        msg = f"cannot create cassette {path}: {exc.strerror}; choose another --cassettes directory"
        raise BenchError(msg) from None
    try:
        _write_fd(fd, first)
    except OSError as exc:
        # A disk that is full now must not leave a 0-byte or headless cassette behind.
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
        msg = f"cannot write cassette {path}: {exc.strerror}; free space or choose another --cassettes directory"
        raise BenchError(msg) from None
    return fd


class CassetteWriter:
    def __init__(
        self,
        path: Path,
        *,
        settings: Settings | None = None,
        run: RunMeta | None = None,
        server: ServerInfo | msgspec.UnsetType = msgspec.UNSET,
        shard: Shard | msgspec.UnsetType = msgspec.UNSET,
        redactor: Redactor | None = None,
        level: int = 3,
        max_queue_bytes: int = 64 << 20,
        compact_on_close: bool = True,
        on_failure: Callable[[str, int], None] | None = None,
    ) -> None:
        self.path = path
        self.redactor = redactor or Redactor()
        self.stats = WriterStats()
        self._max_queue_bytes = max_queue_bytes
        self._queue: deque[Packed] = deque()
        self._queued_bytes = 0
        self._cond = threading.Condition()
        self._closing = False
        self._error: BaseException | None = None
        # Records are numbered as they are queued; `_written` is how many have reached the file, in order.
        self._queued_count = 0
        self._written = 0
        self._waiters: list[tuple[int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._compact = compact_on_close
        # Called from the writer thread, once, when the file fails: (why, records accepted that are lost with it).
        self._on_failure = on_failure
        self._seq = 0  # the header is record 0
        self._zstd = zstandard.ZstdCompressor(level=level)
        self._compressor = self._zstd.compressobj()
        self._frame_bytes = 0
        header, first = _header_frame(level, settings or Settings(), run or RunMeta(), server, shard)
        # The current frame's compressed bytes, kept until it ends: its repair frame is made of them then (a frame
        # holds ~SEGMENT_BYTES of records: about a MiB compressed).
        self._frame_parts: list[bytes] = []
        self._fd = _create(path, first)
        self.stats.records = 1
        self.stats.raw_bytes = len(header)
        self.stats.written_bytes = len(first)
        self._thread = threading.Thread(target=self._run, name=f"cassette-writer:{path.name}", daemon=True)
        self._thread.start()

    # -- producer side -------------------------------------------------------------------------------------------

    def pack_exchange(self, record: Exchange) -> Packed:
        *_, packed = self.packing(record)
        assert packed is not None
        return packed

    def pack_part(self, part: Part) -> Packed:
        """A part record packed for `put_packed`. Its reads must have been scrubbed by this writer's redactor's
        `body_scrubber` (redaction across parts needs what came before, which only the exchange's owner has)."""
        packed, times = encode_part(part)
        return packed, list(times)

    def packing(
        self, record: Exchange, spilled_bytes: int = 0, spill_scrubbed: bool = False
    ) -> Iterator[Packed | None]:
        """`pack_exchange` in steps, redaction's (`Redactor.redact_steps`) then packing, with a None yielded between
        them (an event loop can run other work there); the last value is the packed record. The record is packed
        once, here; the writer's thread only frames it. The arrival times are packed apart, as a column, by the
        writer thread (bench.core.cassette.columns): this side does less than packing them as integers."""
        for _ in self.redactor.redact_steps(record, spilled_bytes, spill_scrubbed):
            yield None
        yield None
        packed, times = encode_exchange(record)
        yield packed, list(times)

    def put(self, record: Exchange) -> None:
        """Queue a finished exchange; blocks the calling thread while the queue is full."""
        self._enqueue([self.pack_exchange(record)], block=True)

    async def put_async(self, record: Exchange) -> int:
        """Queue a finished exchange from the event loop without ever blocking it; returns its number."""
        return await self.put_packed([self.pack_exchange(record)])

    async def put_packed(self, records: Sequence[Packed]) -> int:
        """Queue records packed by `pack_exchange`, as `put_async` does, together: the writer's thread wakes once
        for all of them. Returns the last one's number for `written` (they are numbered in order); the number is
        also the record's `seq` in the file (the header is 0, and records are written in the order queued), which an
        exchange record uses to refer to its part records."""
        ticket = self._enqueue(records, block=False)
        if ticket is None:
            self.stats.queue_full_waits += 1
            ticket = await asyncio.to_thread(self._enqueue, records, True)
            assert ticket is not None
        return ticket

    async def put_durable(self, record: Exchange) -> None:
        """As `put_async`, then wait (the loop runs on) until the record is in the file."""
        await self.written(await self.put_async(record))

    async def written(self, ticket: int) -> None:
        """Wait (the loop runs on) until the record numbered `ticket` is in the file."""
        written: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.when_written(ticket, written)
        await written

    def when_written(self, ticket: int, future: asyncio.Future[None]) -> None:
        """Settle `future` (from its own loop) once the record numbered `ticket` is in the file, or with
        `RecordUnwritten` if the file fails first (the record is then counted in `stats.unwritten`)."""
        with self._cond:
            if self._written >= ticket:
                future.set_result(None)
            elif self._error is not None:
                future.set_exception(self._unwritten(self._error))
            else:
                self._waiters.append((ticket, future.get_loop(), future))

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._failure(self._error)

    def _failure(self, error: BaseException) -> WriterClosed:
        return WriterClosed(f"cassette writer for {self.path} failed: {error}")

    def _unwritten(self, error: BaseException) -> RecordUnwritten:
        return RecordUnwritten(f"cassette writer for {self.path} failed: {error}")

    def _enqueue(self, records: Sequence[Packed], block: bool) -> int | None:
        size = sum(map(_size, records))
        with self._cond:
            while True:
                self._raise_if_failed()
                if self._closing:
                    raise WriterClosed(f"cassette {self.path} is closed")
                if self._queued_bytes == 0 or self._queued_bytes + size <= self._max_queue_bytes:
                    break
                if not block:
                    return None
                self._cond.wait()
            self._queue.extend(records)
            self._queued_bytes += size
            self._queued_count += len(records)
            self._cond.notify_all()
            return self._queued_count

    # -- writer thread -------------------------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue and self._closing:
                    return
                batch = list(self._queue)
                self._queue.clear()
            try:
                self._write_now(batch)
            except BaseException as exc:  # disk full, file removed: surface it to producers
                with self._cond:
                    self._error = exc
                    waiting, self._waiters = self._waiters, []
                    self.stats.unwritten = self._queued_count - self._written
                    self.stats.failure = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                    self._cond.notify_all()
                _wake(waiting, self._unwritten(exc))
                if self._on_failure is not None:
                    self._on_failure(self.stats.failure, self.stats.unwritten)
                return
            with self._cond:
                self._queued_bytes -= sum(_size(b) for b in batch)
                self._written += len(batch)
                waiting = [w for w in self._waiters if w[0] <= self._written]
                if waiting:
                    self._waiters = [w for w in self._waiters if w[0] > self._written]
                self._cond.notify_all()
            _wake(waiting, None)

    def _write_now(self, batch: list[Packed], end_frame: bool = False) -> None:
        # Parts go to the compressor one by one, never joined: a 50 MB body is not copied again on its way.
        compress = self._compressor.compress
        out: list[bytes] = []
        raw = 0
        for packed, times in batch:
            self._seq += 1
            head, body = columns.payload_parts(packed, times)
            pre = prefix(self._seq, head, body)
            out += (compress(pre), compress(head), compress(body))
            raw += len(pre) + len(head) + len(body)
        self._frame_bytes += raw
        # A frame ends only between batches, so records never span frames.
        finish = end_frame or self._frame_bytes >= SEGMENT_BYTES
        out.append(
            self._compressor.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH if finish else zstandard.COMPRESSOBJ_FLUSH_BLOCK)
        )
        data = b"".join(out)
        self._frame_parts.append(data)
        if finish:
            self._compressor = self._zstd.compressobj()
            self._frame_bytes = 0
            # The frame is whole: its repair frame follows it (bench.core.cassette.repair).
            data += repair.repair_frame(b"".join(self._frame_parts))
            self._frame_parts = []
        self._write_all(data)
        self.stats.records += len(batch)
        self.stats.raw_bytes += raw
        self.stats.written_bytes += len(data)

    def _write_all(self, data: bytes) -> None:
        _write_fd(self._fd, data)

    # -- closing ------------------------------------------------------------------------------------------------

    def close(self, end: End | None = None) -> WriterStats:
        """Drain the queue, write the end record, finish the zstd frame and close the file. Idempotent. `end` holds
        the counters of the writer's owner (a proxy's); when it closed, how many exchanges and the queue's waits are
        the writer's own."""
        with self._cond:
            if self._closing:
                return self.stats
            self._closing = True
            self._cond.notify_all()
        self._thread.join()
        try:
            if self._error is None:
                record = msgspec.structs.replace(
                    end or End(),
                    closed=dt.datetime.now(dt.UTC).isoformat(),
                    exchanges=self.stats.records - 1,
                    queue_full_waits=self.stats.queue_full_waits,
                )
                self._write_now([(encode(record), None)], end_frame=True)
                os.fsync(self._fd)
        finally:
            os.close(self._fd)
        if self._error is None and self._compact:
            compact.compact(self.path, self.stats.raw_bytes)
        return self.stats

    async def aclose(self, end: End | None = None) -> WriterStats:
        return await asyncio.to_thread(self.close, end)

    def __enter__(self) -> CassetteWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
