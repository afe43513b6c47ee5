"""Following a cassette as it is recorded: each `poll` returns the exchanges written since the last one.

A recording's file grows by zstd blocks (the writer flushes one after every batch of records) inside frames of up
to SEGMENT_BYTES of records; a frame that is not finished decodes as far as its last flushed block (frames.py). A
tail remembers the offset of the first frame it has not read whole and the sequence number of the last record it
returned: a poll decodes from that frame on (the frame still being written, at most SEGMENT_BYTES of records, and
any frames after it) and returns the records numbered after it, never one twice. The file is mapped read-only and
never written.

- Closing: the writer recompresses the file and renames the new one over it (compact.py), with the same records
  under the same numbers: the tail starts again at the top and returns only what it had not (the end record).
- A new recording under the same name (its first bytes differ, and its header's creation time): read from its first
  record.
- Damage: frames are walked as the reader walks them; what cannot be read is skipped and said in `problems`.
- Bounds: one poll decodes at most `frames_at_once` whole frames (a large file already there is read over several
  polls), and part records (a large body written while its exchange ran) are kept until their exchange comes, up to
  MAX_PART_BYTES.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterable
from pathlib import Path

from bench.core.cassette import frames
from bench.core.cassette.envelope import Unframer
from bench.core.cassette.reader import (
    PAYLOAD_ERRORS,
    CassetteReader,
    PartsMissing,
    attach_parts,
    record_of_payload,
)
from bench.core.cassette.records import End, Exchange, Header, Part
from bench.core.errors import CassetteError

MAX_PART_BYTES = 256 << 20  # body bytes of part records held for exchanges not yet ended
HEAD_BYTES = 64  # the file's first bytes (its header frame's), compared at each poll: another file if they differ


class CassetteTail:
    def __init__(self, path: Path, frames_at_once: int = 8) -> None:
        self.path = path
        self.frames_at_once = frames_at_once
        self.header: Header | None = None
        self.end: End | None = None  # the end record, once the recording is closed
        self.problems: list[str] = []  # what could not be read, in words (one line each)
        self._identity: tuple[int, int, bytes] | None = None
        self._size = 0  # the file's size when last read
        self._resume = 0  # offset of the first frame not read whole
        self._base_seq = 0  # the last sequence number before that frame
        self._last_seq = 0  # the last record returned (or skipped as damaged)
        self._parts: dict[int, Part] = {}
        self._part_bytes = 0
        self._done = False  # read to the end as the file was `_size` bytes long

    def poll(self) -> list[Exchange]:
        """The exchanges written since the last poll, in order (CassetteError: the file cannot be read at all)."""
        try:
            st = os.stat(self.path)
            with open(self.path, "rb") as fh:
                head = fh.read(HEAD_BYTES)
        except OSError as exc:
            raise CassetteError(f"{self.path}: cannot open: {exc.strerror}") from None
        # The inode alone is not enough: a file deleted and made again under the name may get the same one.
        identity = (st.st_dev, st.st_ino, head)
        if self._identity is not None and (identity != self._identity or st.st_size < self._size):
            self._replaced()
        self._identity = identity
        if self.header is None:
            reader = CassetteReader(self.path)
            if reader.version < 2:
                raise CassetteError(f"{self.path}: a v1 cassette cannot be followed; bench cassette upgrade it")
            self.header = reader.header
        if st.st_size == self._size and self._done:
            return []
        buf = frames.open_bytes(self.path)
        try:
            self._size = len(buf)
            return self._read(buf)
        finally:
            if not isinstance(buf, bytes):
                buf.close()

    def _replaced(self) -> None:
        """The file was renamed over (a closing recompression) or cut: read it again from the top."""
        created = self.header.created_us if self.header is not None else None
        self.header = CassetteReader(self.path).header
        self._resume = self._base_seq = 0
        self._done = False
        if self.header.created_us != created:  # another recording: its numbers start again
            self._last_seq = 0
            self._parts.clear()
            self._part_bytes = 0
            self.end = None

    def _read(self, buf: mmap.mmap | bytes) -> list[Exchange]:
        out: list[Exchange] = []
        unframer = Unframer(last_seq=self._base_seq)
        in_header = self._resume == 0  # the first frame holds the header alone
        whole = 0
        for event in frames.walk(buf, self._resume):
            if isinstance(event, frames.Data):
                if not in_header:
                    self._take(unframer.feed(event.data), out)
                continue
            if not in_header:
                self._take(unframer.finish(), out)
                whole += 1
            in_header = False
            if isinstance(event, frames.Cut):
                return out  # the frame being written: read again from its start next time
            if isinstance(event, frames.Skipped):
                self.problems.append(f"{self.path}: bytes {event.offset}-{event.resume} skipped: {event.why}")
                self._resume = event.resume
            else:
                self._resume = event.end
            self._base_seq = max(self._base_seq, unframer.last_seq)
            if whole >= self.frames_at_once:
                return out
        self._done = True
        return out

    def _take(self, records: Iterable[tuple[int, bytes | memoryview]], out: list[Exchange]) -> None:
        for seq, payload in records:
            if seq <= self._last_seq:
                continue  # returned before (the frame is read again as it grows)
            self._last_seq = seq
            try:
                record = record_of_payload(payload)
            except PAYLOAD_ERRORS as exc:
                self.problems.append(f"{self.path}: record {seq} is malformed ({str(exc)[:200]}); skipped")
                continue
            if isinstance(record, Part):
                self._hold(seq, record)
            elif isinstance(record, End):
                self.end = record
            elif isinstance(record, Exchange):
                out.append(self._whole(record))

    def _hold(self, seq: int, part: Part) -> None:
        size = sum(map(len, part.chunks))
        if self._part_bytes + size > MAX_PART_BYTES:
            self.problems.append(f"{self.path}: part record {seq} of a large body not kept (past {MAX_PART_BYTES} B)")
            return
        self._parts[seq] = part
        self._part_bytes += size

    def _whole(self, record: Exchange) -> Exchange:
        """The exchange with the reads of its part records put back in front (those kept); said if some are not."""
        if not record.response.parts:
            return record
        parts = [self._parts.pop(s, None) for s in record.response.parts]
        self._part_bytes -= sum(sum(map(len, p.chunks)) for p in parts if p is not None)
        try:
            attach_parts(record, parts)
        except PartsMissing as exc:
            self.problems.append(f"{self.path}: {exc}: shown with the reads it kept")
            record.response.parts = []
        return record
