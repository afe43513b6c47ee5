"""`bench proxy --rotate-size SIZE --rotate-every DURATION`: a long-running proxy closes its cassette and opens the
next one, so that no file grows forever and each closed one can be uploaded (docs/scale.md).

A rotation never splits an exchange and never pauses forwarding. The next cassette is created in a thread, then the
proxy gets a new Sink (bench.proxy.sink) around it: exchanges finishing from then on are recorded there, whole, while
the old Sink's Persister finishes the records it already holds into the old cassette. Only once that is done is the old
cassette closed, in a thread (draining, the end record, fsync and the recompression at close are all off the loop), and
handed to `on_closed` (the upload, with `--cassettes URL`). The loop itself only swaps two references. The close runs at
the lowest CPU priority (it recompresses the file), so on a busy machine it takes idle time only."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import threading
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from time import monotonic

from bench.core.cassette import CassetteReader, CassetteWriter
from bench.core.cassette.format import SUFFIX
from bench.core.cassette.records import End
from bench.core.errors import BenchError
from bench.proxy.server import RunningProxy
from bench.proxy.sink import Sink, writer_failed

log = logging.getLogger("bench.proxy")

_SIZE = re.compile(r"(?i)^\s*(\d+(?:\.\d+)?)\s*(b|kb|kib|mb|mib|gb|gib|tb|tib)?\s*$")
_UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_DURATION = re.compile(r"(?i)^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)?\s*$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# How often the size and age of the open cassette are looked at: a rotation is late by at most this.
CHECK_S = 0.25


def parse_size(text: str) -> int:
    """`500MB`, `1GiB`, `200000` (bytes) -> bytes."""
    m = _SIZE.match(text)
    if m is None or float(m.group(1)) <= 0:
        raise BenchError(f"--rotate-size {text!r}: give a size such as 500MB, 1GiB or a number of bytes")
    return int(float(m.group(1)) * _UNITS[(m.group(2) or "b").lower()])


def parse_duration(text: str) -> float:
    """`30s`, `10m`, `1h`, `1d`, `90` (seconds) -> seconds."""
    m = _DURATION.match(text)
    if m is None or float(m.group(1)) <= 0:
        raise BenchError(f"--rotate-every {text!r}: give a duration such as 30s, 10m, 1h or 1d")
    return float(m.group(1)) * _SECONDS[(m.group(2) or "s").lower()]


OnClosed = Callable[[Path], Awaitable[None]]
FIRST = "-00000"


def rotation_first_path(path: Path) -> Path:
    """The first cassette of a rotating series: numbered like the rest, since `rec-X.cassette` would sort after
    `rec-X-00001.cassette` ('.' > '-'): the names of a series sort in recording order (docs/scale.md)."""
    return path.with_name(path.name.removesuffix(SUFFIX) + FIRST + SUFFIX)


class Rotator:
    """Rotates a running proxy's cassette when it has `size` bytes written or is `every` seconds old."""

    def __init__(
        self,
        proxy: RunningProxy,
        *,
        size: int | None = None,
        every: float | None = None,
        on_closed: OnClosed | None = None,
    ) -> None:
        if proxy.cassette_path is None or proxy.recording.writer is None:
            raise BenchError("--rotate-size/--rotate-every: this proxy writes no cassette (passthrough); drop them")
        self.proxy = proxy
        self.size = size
        self.every = every
        self.on_closed = on_closed
        self.rotations = 0
        self.closed: list[Path] = []
        first = proxy.cassette_path
        self._stem = first.name[: -len(SUFFIX)] if first.name.endswith(SUFFIX) else first.stem
        # `bench proxy` names a rotating series' first cassette `-00000` (rotation_first_path): the next ones
        # number on from its stem, so every name of the series sorts in recording order.
        self._stem = self._stem.removesuffix(FIRST)
        self._folder = first.parent
        self._opened = monotonic()
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._closing: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._watch())

    def due(self) -> bool:
        writer = self.proxy.recording.writer
        if writer is None or writer.stats.records <= 1:
            return False  # nothing recorded yet (the header is record 0): an empty cassette is not worth a file
        if self.size is not None and writer.stats.written_bytes >= self.size:
            return True
        return self.every is not None and monotonic() - self._opened >= self.every

    async def _watch(self) -> None:
        # Never cancelled mid-rotation (a cassette opened and not yet in use would be left unclosed): told to stop.
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), CHECK_S)
            if not self._stop.is_set() and self.due() and not self.proxy.closing:
                await self.rotate()

    async def rotate(self) -> Path:
        """Open the next cassette, send new records there, close the old one off the loop; returns the new path."""
        recording = self.proxy.recording
        old_sink = recording.sink
        assert old_sink is not None
        old_writer = old_sink.writer
        self.rotations += 1
        path = self._folder / f"{self._stem}-{self.rotations:05d}{SUFFIX}"
        # Same settings, run and redaction as the first cassette: read back from its header, in a thread, with the
        # new file's creation (a header write and an fsync-free create: still file-system work, kept off the loop).
        new_writer = await asyncio.to_thread(self._open_like, old_writer, path)
        sink = Sink(new_writer, self.proxy.stats)
        sink.loop_lag = old_sink.loop_lag
        recording.sink = sink
        self.proxy.cassette_path = path
        self._opened = monotonic()
        task = asyncio.get_running_loop().create_task(self._close(old_writer, old_sink))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)
        return path

    def _open_like(self, old: CassetteWriter, path: Path) -> CassetteWriter:
        header = CassetteReader(old.path).header
        return CassetteWriter(
            path,
            settings=header.settings,
            run=header.run,
            server=header.server,
            shard=header.shard,
            redactor=old.redactor,
            on_failure=partial(writer_failed, path),
        )

    async def _close(self, writer: CassetteWriter, sink: Sink) -> None:
        # The old Persister's last records go to the old cassette before it is closed, and so do those of exchanges
        # that wrote parts of their body there (they end there, however long they still run).
        await sink.drained()
        stats = self.proxy.stats
        try:
            await _in_background(writer, End(errors=stats.errors, client_disconnects=stats.client_disconnects))
        except OSError as exc:
            log.error("bench proxy: could not finish cassette %s: %s", writer.path, exc.strerror)
            return
        finally:
            # Records the writer had accepted when its file failed were counted as recorded: they are not.
            stats.exchanges -= writer.stats.unwritten
            stats.lost += writer.stats.unwritten
            writer.stats.unwritten = 0
        self.closed.append(writer.path)
        if self.on_closed is not None:
            await self.on_closed(writer.path)

    async def stop(self) -> None:
        """Stop rotating and wait for the cassettes being closed (and uploaded); the proxy closes the open one."""
        self._stop.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        while self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)


# The close recompresses the whole cassette at a high zstd level (bench.core.cassette.compact): seconds of CPU that zstd
# spends outside the GIL, but on the same cores as the forwarding loop. Done in a thread of its own at the lowest
# priority, the kernel runs it on time the loop does not want, so a busy proxy's streams do not wait for it.
BACKGROUND_NICE = 19


async def _in_background(writer: CassetteWriter, end: End) -> None:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def settle(error: BaseException | None) -> None:
        if done.cancelled():
            return
        if error is None:
            done.set_result(None)
        else:
            done.set_exception(error)

    def work() -> None:
        with contextlib.suppress(OSError, AttributeError):  # a thread's own priority: Linux (and a few others)
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICE)
        try:
            writer.close(end)
        except BaseException as exc:
            loop.call_soon_threadsafe(settle, exc)
        else:
            loop.call_soon_threadsafe(settle, None)

    threading.Thread(target=work, name=f"cassette-close:{writer.path.name}").start()
    await done
