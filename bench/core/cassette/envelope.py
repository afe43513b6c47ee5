"""v2 record framing: every record after the header is `length, seq, check` (three little-endian uint32) + payload.

`seq` numbers the records of a file (the header is 0, the first exchange 1, ...), so a reader knows exactly how many
records damage took; `check` is the low 32 bits of XXH3-64 of the payload seeded with `length << 32 | seq`, so it
covers all three and no changed byte goes unnoticed (XXH3 rather than crc32: ~55x faster here, see pyproject).
Records never span zstd frames: the data of each frame is unframed on its own, and damage inside a frame costs only
the records it touches (the reader looks for the next record whose prefix and checksum hold).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import xxhash

PREFIX = struct.Struct("<III")
HEAD = struct.Struct("<II")
SEQ = struct.Struct("<I")
# A record at a frame's start may follow thousands lost in a skipped frame; the checksum is what decides.
MAX_GAP = 1 << 24
# Inside a damaged frame the reader searches for the next few sequence numbers (one `find` each).
SEARCH_GAP = 256
# The largest record a reader takes: the proxy's largest request body (256 MiB, bench.proxy.app) with room for the
# rest of its exchange (a response over 4 MiB is written in part records). A prefix claiming more is damage: no
# crafted length makes a reader wait for, and hold, gigabytes.
MAX_RECORD = 300 << 20
# After damage, at most this much of the rest of a frame is kept to search for the next record (a frame bench wrote
# holds 4 MiB of records plus one batch); the rest of the frame is counted as damaged bytes, never held.
MAX_RESYNC = 16 << 20
# Places that look like a record (a plausible sequence number) checked per search at most.
MAX_CANDIDATES = 1024


def check(length: int, seq: int, payload: bytes | memoryview) -> int:
    return xxhash.xxh3_64_intdigest(payload, seed=(length << 32) | seq) & 0xFFFFFFFF


def prefix(seq: int, *parts: bytes) -> bytes:
    """The prefix of a record whose payload is the parts one after the other."""
    length = sum(map(len, parts))
    if len(parts) == 1:
        return PREFIX.pack(length, seq, check(length, seq, parts[0]))
    hasher = xxhash.xxh3_64(seed=(length << 32) | seq)
    for part in parts:
        hasher.update(part)
    return PREFIX.pack(length, seq, hasher.intdigest() & 0xFFFFFFFF)


def frame_record(seq: int, payload: bytes) -> bytes:
    return prefix(seq, payload) + payload


def record_ends(data: bytes | bytearray | memoryview) -> Iterator[int]:
    """Offsets just past each framed record of well-formed data (the writer's own output)."""
    pos = 0
    while pos < len(data):
        length, _, _ = PREFIX.unpack_from(data, pos)
        pos += PREFIX.size + length
        yield pos


@dataclass
class Unframer:
    """Framed records out of a frame's decompressed data; counts what damage took.

    `feed` the data as it comes, `finish` at the end of a frame (clean, damaged or cut). After damage inside a frame,
    the rest of that frame is buffered and searched for the next valid record.
    """

    last_seq: int = 0
    lost: int = 0  # records known to be missing (gaps in seq)
    bad_bytes: int = 0  # decompressed bytes that held no valid record

    def __post_init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0
        self._resync = False
        # A record begun in earlier pieces (its prefix whole and plausible): views of them, joined once it is whole.
        self._parts: list[memoryview] = []
        self._have = 0

    def feed(self, data: bytes) -> list[tuple[int, bytes | memoryview]]:
        """The records completed by `data`. Records that lie whole inside `data` come as views of it (no copy: `data`
        is never changed, so a view stays valid); a record cut between pieces is joined once, when it is whole."""
        if self._resync:
            self._hold(data)
            return []
        out: list[tuple[int, bytes | memoryview]] = []
        at = 0
        if self._parts:
            joined = self._join(data, out)
            if joined is None:
                return out
            at = joined
        elif len(self._buf) > self._pos:
            # A record begun in the previous piece shorter than its prefix: complete it in the buffer.
            at = self._complete(data)
            out += self._parse()
            if self._resync:
                self._hold(data[at:])  # damage: the rest of the frame is searched at its end
                return out
            if len(self._buf) > self._pos:
                return out  # the record still is not whole
            self._buf = bytearray()
            self._pos = 0
        self._parse_in(data, at, out)
        return out

    def _join(self, data: bytes, out: list[tuple[int, bytes | memoryview]]) -> int | None:
        """Completes the record begun in earlier pieces from the front of `data`: the offset in `data` past it, or None
        when `data` is all taken (the record still is not whole, or it is damaged: the rest of the frame is then
        searched at its end, from the buffer, as if the record had been gathered there)."""
        length, seq, stored = PREFIX.unpack_from(self._parts[0])
        missing: int = PREFIX.size + length - self._have
        view = memoryview(data)
        if missing > len(data):
            self._parts.append(view)
            self._have += len(data)
            return None
        self._parts.append(view[:missing])
        record = b"".join(self._parts)
        self._parts, self._have = [], 0
        payload = memoryview(record)[PREFIX.size :]
        if check(length, seq, payload) != stored:
            self._buf, self._pos, self._resync = bytearray(record), 0, True
            self._hold(data[missing:])
            return None
        self._note(seq)
        out.append((seq, payload))
        return missing

    def _hold(self, data: bytes) -> None:
        """Keep the rest of a damaged frame for the search at its end, MAX_RESYNC at most (the rest is damage)."""
        room = max(0, MAX_RESYNC - (len(self._buf) - self._pos))
        self.bad_bytes += max(0, len(data) - room)
        self._buf += data[:room]

    def _complete(self, data: bytes) -> int:
        """Moves into the buffer the bytes of `data` that the record begun there needs (all of them if its prefix
        cannot be trusted yet); returns how many were taken."""
        have = len(self._buf) - self._pos
        need = PREFIX.size - have
        if need > 0:
            self._buf += data[:need]
            if len(self._buf) - self._pos < PREFIX.size:
                return len(data)
            taken = need
        else:
            taken = 0
        length, seq, _ = PREFIX.unpack_from(self._buf, self._pos)
        if not self.last_seq < seq <= self.last_seq + MAX_GAP or length > MAX_RECORD:
            self._hold(data[taken:])  # not a plausible record: _parse finds the damage
            return len(data)
        missing = self._pos + PREFIX.size + length - len(self._buf)
        if missing > 0:
            self._buf += data[taken : taken + missing]
            taken += missing
        return min(taken, len(data))

    def _parse_in(self, data: bytes, pos: int, out: list[tuple[int, bytes | memoryview]]) -> None:
        """Records read in place from `data` from `pos` on; what is left (a record not yet whole, or damage to
        search) is kept for the next piece or the frame's end."""
        n = len(data)
        view = memoryview(data)
        unpack = PREFIX.unpack_from
        digest = xxhash.xxh3_64_intdigest
        last = self.last_seq
        while n - pos >= PREFIX.size:
            length, seq, stored = unpack(data, pos)
            if not last < seq <= last + MAX_GAP or length > MAX_RECORD:
                break
            end = pos + PREFIX.size + length
            if end > n:
                break
            payload = view[pos + PREFIX.size : end]
            if digest(payload, (length << 32) | seq) & 0xFFFFFFFF != stored:  # check(), inlined: per record
                break
            if seq > last + 1:
                self.lost += seq - last - 1
            last = self.last_seq = seq
            pos = end
            out.append((seq, payload))
        if pos == n:
            return
        if n - pos >= PREFIX.size:
            length, seq, _ = unpack(data, pos)
            if last < seq <= last + MAX_GAP and length <= MAX_RECORD and pos + PREFIX.size + length > n:
                self._parts, self._have = [view[pos:]], n - pos  # a record not yet whole
                return
        self._buf = bytearray(view[pos:])
        self._pos = 0
        # Not a plausible record start, or a whole one whose checksum fails: damage, searched at the frame's end.
        self._resync = len(self._buf) >= PREFIX.size

    def _note(self, seq: int) -> None:
        if seq > self.last_seq + 1:
            self.lost += seq - self.last_seq - 1
        self.last_seq = seq

    def finish(self) -> Iterator[tuple[int, bytes | memoryview]]:
        """End of the frame's data: resynchronise through what is left, then count the rest as damage."""
        if self._resync:
            yield from self._search()
        self.bad_bytes += len(self._buf) - self._pos + self._have
        self._buf = bytearray()
        self._pos = 0
        self._resync = False
        self._parts, self._have = [], 0

    def _parse(self) -> Iterator[tuple[int, bytes | memoryview]]:
        buf = self._buf
        while len(buf) - self._pos >= PREFIX.size:
            if self._incomplete(self._pos):
                break
            got = self._valid_at(self._pos)
            if got is None:  # damaged here: search the rest of the frame once it has all arrived
                self._resync = True
                return
            yield self._take(*got)
        if self._pos > 1 << 20 and self._pos * 2 > len(buf):
            del buf[: self._pos]
            self._pos = 0

    def _search(self) -> Iterator[tuple[int, bytes | memoryview]]:
        buf = self._buf
        start = self._pos
        while True:
            found = self._next_valid(start)
            if found is None:
                return
            at, seq, end = found
            self.bad_bytes += at - self._pos
            self._pos = at
            yield self._take(seq, end)
            # Go on normally from the next record; damage further on starts another search.
            while len(buf) - self._pos >= PREFIX.size:
                got = self._valid_at(self._pos)
                if got is None:
                    break
                yield self._take(*got)
            start = self._pos

    def _take(self, seq: int, end: int) -> tuple[int, bytes]:
        payload = memoryview(self._buf)[self._pos + PREFIX.size : end].tobytes()
        self._note(seq)
        self._pos = end
        return seq, payload

    def _incomplete(self, pos: int) -> bool:
        """A plausible record at pos whose bytes have not all arrived yet."""
        length, seq, _ = PREFIX.unpack_from(self._buf, pos)
        plausible = self.last_seq < seq <= self.last_seq + MAX_GAP and length <= MAX_RECORD
        return bool(plausible and pos + PREFIX.size + length > len(self._buf))

    def _valid_at(self, pos: int, gap: int = MAX_GAP) -> tuple[int, int] | None:
        """(seq, end) of a whole, valid record at pos, else None."""
        length, seq, stored = PREFIX.unpack_from(self._buf, pos)
        if seq <= self.last_seq or seq > self.last_seq + gap or length > MAX_RECORD:
            return None
        end = pos + PREFIX.size + length
        if end > len(self._buf):
            return None
        view = memoryview(self._buf)
        try:
            if check(length, seq, view[pos + PREFIX.size : end]) != stored:
                return None
        finally:
            view.release()
        return seq, end

    def _next_valid(self, start: int) -> tuple[int, int, int] | None:
        """The first valid record after `start`: a place whose sequence number is one of the next few after the last
        good, found in one vectorised pass (a `find` per number scanned the rest of the frame 256 times: 20 s for
        16 MiB of zeros), then checked in order, MAX_CANDIDATES at most (crafted data cannot make this unbounded)."""
        import numpy as np  # here only: damage is rare, and every command would pay for the import

        buf = self._buf
        lo, hi = self.last_seq + 1, self.last_seq + SEARCH_GAP
        found = []
        for shift in range(SEQ.size):
            first = start + 1 + shift + HEAD.size - SEQ.size  # the seq field of a record at start + 1 + shift
            count = (len(buf) - first) // SEQ.size
            if count <= 0:
                continue
            seqs = np.frombuffer(buf, dtype="<u4", count=count, offset=first)
            hits = np.flatnonzero((seqs >= lo) & (seqs <= hi))
            found.append(first - (HEAD.size - SEQ.size) + SEQ.size * hits)
            del seqs  # the view holds the bytearray: it must be gone before the buffer changes size
        if not found:
            return None
        for pos in np.sort(np.concatenate(found))[:MAX_CANDIDATES].tolist():
            if pos + PREFIX.size <= len(buf):
                got = self._valid_at(pos, gap=SEARCH_GAP)
                if got:
                    return pos, got[0], got[1]
        return None
