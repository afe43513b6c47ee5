"""Append-only, crash-safe cassette writer.

Layout: one zstd frame per file; each record is msgpack-packed by the caller's thread (cheap, and it freezes the
record), then compressed and written by one writer thread, with a zstd block flush after each batch of records. A
streaming decompressor reads every flushed block of a file cut short by kill -9, so only records still queued are
lost. One stream per file compresses ~3x better than a frame per exchange because envelopes repeat (FIELD-NOTES).

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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
import zstandard

from bench import __version__
from bench.cassette.format import END, EXCHANGE, FORMAT_NAME, FORMAT_VERSION, HEADER, SUFFIX
from bench.cassette.redact import Redactor
from bench.errors import BenchError
from bench.fingerprint import FINGERPRINT_VERSION


@dataclass
class WriterStats:
    records: int = 0
    raw_bytes: int = 0
    written_bytes: int = 0
    queue_full_waits: int = 0


class WriterClosed(RuntimeError):
    pass


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


class CassetteWriter:
    def __init__(
        self,
        path: Path,
        *,
        settings: dict[str, Any] | None = None,
        run: dict[str, Any] | None = None,
        redactor: Redactor | None = None,
        level: int = 3,
        max_queue_bytes: int = 64 << 20,
    ) -> None:
        self.path = path
        self.redactor = redactor or Redactor()
        self.stats = WriterStats()
        self._max_queue_bytes = max_queue_bytes
        self._queue: deque[bytes] = deque()
        self._queued_bytes = 0
        self._cond = threading.Condition()
        self._closing = False
        self._error: BaseException | None = None
        self._packer = msgpack.Packer(use_bin_type=True)
        # Records are numbered as they are queued; `_written` is how many have reached the file, in order.
        self._queued_count = 0
        self._written = 0
        self._waiters: list[tuple[int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        except OSError as exc:
            msg = f"cannot create cassette {path}: {exc.strerror}; choose another --cassettes directory"
            raise BenchError(msg) from None
        self._compressor = zstandard.ZstdCompressor(level=level).compressobj()
        now = dt.datetime.now(dt.UTC)
        header = {
            "kind": HEADER,
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "bench_version": __version__,
            "fingerprint_version": FINGERPRINT_VERSION,
            "created": now.isoformat(),
            "created_us": int(now.timestamp() * 1e6),
            "settings": settings or {},
            "run": run or {},
        }
        self._write_now([self._packer.pack(header)])
        self._thread = threading.Thread(target=self._run, name=f"cassette-writer:{path.name}", daemon=True)
        self._thread.start()

    # -- producer side -------------------------------------------------------------------------------------------

    def pack_exchange(self, record: dict[str, Any]) -> bytes:
        *_, packed = self.packing(record)
        assert packed is not None
        return packed

    def packing(self, record: dict[str, Any]) -> Iterator[bytes | None]:
        """`pack_exchange` in two steps, redaction then packing, with a None yielded between them (an event loop can
        run other work there); the last value is the packed record."""
        record["kind"] = EXCHANGE
        self.redactor.redact_exchange(record)
        yield None
        yield bytes(self._packer.pack(record))

    def put(self, record: dict[str, Any]) -> None:
        """Queue a finished exchange; blocks the calling thread while the queue is full."""
        self._enqueue([self.pack_exchange(record)], block=True)

    async def put_async(self, record: dict[str, Any]) -> int:
        """Queue a finished exchange from the event loop without ever blocking it; returns its number."""
        return await self.put_packed([self.pack_exchange(record)])

    async def put_packed(self, records: Sequence[bytes]) -> int:
        """Queue records packed by `pack_exchange`, as `put_async` does, together: the writer's thread wakes once
        for all of them. Returns the last one's number for `written` (they are numbered in order)."""
        ticket = self._enqueue(records, block=False)
        if ticket is None:
            self.stats.queue_full_waits += 1
            ticket = await asyncio.to_thread(self._enqueue, records, True)
            assert ticket is not None
        return ticket

    async def put_durable(self, record: dict[str, Any]) -> None:
        """As `put_async`, then wait (the loop runs on) until the record is in the file."""
        await self.written(await self.put_async(record))

    async def written(self, ticket: int) -> None:
        """Wait (the loop runs on) until the record numbered `ticket` is in the file."""
        written: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.when_written(ticket, written)
        await written

    def when_written(self, ticket: int, future: asyncio.Future[None]) -> None:
        """Settle `future` (from its own loop) once the record numbered `ticket` is in the file, or with
        `WriterClosed` if the file fails first."""
        with self._cond:
            if self._written >= ticket:
                future.set_result(None)
            elif self._error is not None:
                future.set_exception(self._failure(self._error))
            else:
                self._waiters.append((ticket, future.get_loop(), future))

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._failure(self._error)

    def _failure(self, error: BaseException) -> WriterClosed:
        return WriterClosed(f"cassette writer for {self.path} failed: {error}")

    def _enqueue(self, records: Sequence[bytes], block: bool) -> int | None:
        size = sum(map(len, records))
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
                    self._cond.notify_all()
                _wake(waiting, self._failure(exc))
                return
            with self._cond:
                self._queued_bytes -= sum(len(b) for b in batch)
                self._written += len(batch)
                waiting = [w for w in self._waiters if w[0] <= self._written]
                if waiting:
                    self._waiters = [w for w in self._waiters if w[0] > self._written]
                self._cond.notify_all()
            _wake(waiting, None)

    def _write_now(self, batch: list[bytes], end_frame: bool = False) -> None:
        parts = [self._compressor.compress(b) for b in batch]
        flush = zstandard.COMPRESSOBJ_FLUSH_FINISH if end_frame else zstandard.COMPRESSOBJ_FLUSH_BLOCK
        parts.append(self._compressor.flush(flush))
        data = b"".join(parts)
        out = memoryview(data)
        while out:
            n = os.write(self._fd, out)
            out = out[n:]
        self.stats.records += len(batch)
        self.stats.raw_bytes += sum(len(b) for b in batch)
        self.stats.written_bytes += len(data)

    # -- closing ------------------------------------------------------------------------------------------------

    def close(self, **end_info: Any) -> WriterStats:
        """Drain the queue, write the end record, finish the zstd frame and close the file. Idempotent."""
        with self._cond:
            if self._closing:
                return self.stats
            self._closing = True
            self._cond.notify_all()
        self._thread.join()
        try:
            if self._error is None:
                end = {
                    "kind": END,
                    "closed": dt.datetime.now(dt.UTC).isoformat(),
                    "exchanges": self.stats.records - 1,
                    "queue_full_waits": self.stats.queue_full_waits,
                    **end_info,
                }
                self._write_now([self._packer.pack(end)], end_frame=True)
                os.fsync(self._fd)
        finally:
            os.close(self._fd)
        return self.stats

    async def aclose(self, **end_info: Any) -> WriterStats:
        return await asyncio.to_thread(self.close, **end_info)

    def __enter__(self) -> CassetteWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
