"""Lines of a scores file sorted without holding them all: kept encoded up to a budget, then written to a temporary
file as a sorted run; at the end the runs and what is left in memory are merged (heapq.merge) into one sorted stream.

Each entry is (key, unit, seq, line): `line` is the bytes written to the scores file, `key` what the file is sorted
by, and (unit, seq) the unit's index and the entry's place in that unit's output. Ties on `key` are therefore broken
exactly as a stable sort of every unit's output concatenated in unit order breaks them, whatever order units finish
in, so a spilled run and an in-memory one give the same bytes.
"""

from __future__ import annotations

import heapq
import struct
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

Entry = tuple[tuple[Any, ...], int, int, bytes]

# Encoded lines held before a run is written: a few thousand results. What a run holds in memory is this plus the
# units in flight, whatever the number of exchanges.
SPILL_BYTES = 32 << 20
# Bytes an entry costs beyond its line (the tuples, the key's strings).
ENTRY_OVERHEAD = 256
# Runs merged at once: when there are this many, they are merged into one, so open files stay bounded.
FAN_IN = 64
READ_BUFFER = 64 << 10
WRITE_BUFFER = 1 << 20  # a run is written an entry at a time: in large blocks, not a system call every few entries

_LEN = struct.Struct("<I")
_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder()


class Spill:
    """Sorted entries, spilled to `directory` in runs when more than `budget` bytes are buffered."""

    def __init__(self, directory: Path, name: str, budget: int = SPILL_BYTES) -> None:
        self.directory = directory
        self.name = name
        self.budget = budget
        self.buffer: list[Entry] = []
        self.buffered = 0
        self.runs: list[Path] = []
        self.count = 0
        self._made = 0

    def add(self, unit: int, items: Iterable[tuple[tuple[Any, ...], bytes]]) -> None:
        """One unit's entries, (key, line) in the unit's own order."""
        for seq, (key, line) in enumerate(items):
            self.buffer.append((key, unit, seq, line))
            self.buffered += len(line) + ENTRY_OVERHEAD
            self.count += 1
            if self.buffered > self.budget:
                self._flush()

    def _new_run(self) -> Path:
        self._made += 1
        return self.directory / f"{self.name}-{self._made:06d}.run"

    def _flush(self) -> None:
        if not self.buffer:
            return
        self.buffer.sort(key=_order)
        path = self._new_run()
        _write_run(path, self.buffer)
        self.runs.append(path)
        self.buffer, self.buffered = [], 0
        if len(self.runs) >= FAN_IN:
            merged = self._new_run()
            _write_run(merged, heapq.merge(*(_read_run(p) for p in self.runs), key=_order))
            for p in self.runs:
                p.unlink()
            self.runs = [merged]

    def merged(self) -> Iterator[Entry]:
        """Every entry, in (key, unit, seq) order. Reads the runs; call once, after the last `add`."""
        self.buffer.sort(key=_order)
        streams: list[Iterable[Entry]] = [_read_run(p) for p in self.runs]
        streams.append(self.buffer)
        yield from heapq.merge(*streams, key=_order)


def _order(entry: Entry) -> tuple[tuple[Any, ...], int, int]:
    return entry[0], entry[1], entry[2]


def _write_run(path: Path, entries: Iterable[Entry]) -> None:
    with open(path, "wb", buffering=WRITE_BUFFER) as fh:
        for key, unit, seq, line in entries:
            frame = _ENCODER.encode((key, unit, seq, line))
            fh.write(_LEN.pack(len(frame)))
            fh.write(frame)


def _read_run(path: Path) -> Iterator[Entry]:
    with open(path, "rb", buffering=READ_BUFFER) as fh:
        yield from _frames(fh)


def _frames(fh: BinaryIO) -> Iterator[Entry]:
    while head := fh.read(_LEN.size):
        (size,) = _LEN.unpack(head)
        key, unit, seq, line = _DECODER.decode(fh.read(size))
        yield tuple(key), unit, seq, line


def spill_dir(near: Path) -> tempfile.TemporaryDirectory[str]:
    """Runs go next to the scores file (the disk the user chose for output), removed when the run ends."""
    near.mkdir(parents=True, exist_ok=True)
    return tempfile.TemporaryDirectory(prefix=".bench-spill-", dir=near)
