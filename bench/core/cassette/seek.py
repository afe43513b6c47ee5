"""Reading some exchanges of a v2 cassette without decoding the ones before them: an index of where each one is.

A v2 file is a sequence of zstd frames; records never span frames and each carries its sequence number and checksum
(framing.py). A zstd frame decodes only from its start, so the index maps an exchange id to its frame (compressed
start and end, the frame's first sequence number) and its own sequence number: reading it decodes that one frame (at
most SEGMENT_BYTES of records, 4 MiB) and takes the record with that number. Opening result N of a 100,000-exchange
run then costs one frame, not a scan of everything before it.

The index is built by reading the file once, as far as needed (a search stops at the frame that holds the ids it
looks for, and the next goes on from there), keeping the ids and numbers, never the records. It lives in memory:
nothing is written into or beside the cassette.
- Growth: the last frame of a recording still being written is not finished. Its records are indexed, and the next
  search starts again at that frame, so records appended since are found.
- Replacement: a proxy closing its cassette recompresses it and renames the new file over the old one (other
  offsets). The index keeps the file's identity (device and inode; for a URL its ETag or mtime) and size, and
  starts again when the identity changed or the file shrank.
- Damage: frames are walked as the reader walks them (frames.py), so records after damage are indexed too. A record
  read at its place must be there, whole (its checksum holds), with the id the index gave it; if not, the index is
  dropped and the ids are found by a streaming scan with CassetteReader, which reads everything readable. v1 files
  (one frame, no sequence numbers) are always scanned.
"""

from __future__ import annotations

import bisect
import mmap
import os
import threading
from collections import defaultdict
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from bench.core.cassette import columns, frames
from bench.core.cassette.envelope import Unframer
from bench.core.cassette.reader import (
    PAYLOAD_ERRORS,
    CassetteReader,
    PartsMissing,
    attach_parts,
    exchange_of_payload,
    part_of_payload,
)
from bench.core.cassette.records import Exchange, Part
from bench.core.errors import CassetteError
from bench.core.storage import Location, explain, filesystem, is_url


class _Id(msgspec.Struct, gc=False):
    """The two fields the index needs from a record; msgspec skips the rest (chunks and all) without decoding it."""

    kind: str | None = None
    id: str | None = None


_ID = msgspec.msgpack.Decoder(_Id)


@dataclass(frozen=True)
class Frame:
    start: int  # offset of the frame's first byte in the file
    end: int  # offset just past it (for a frame not finished: the file's size when it was indexed)
    first_seq: int  # sequence number of the first record read in it


class Spot(NamedTuple):
    frame: int  # position in SeekIndex.frames
    seq: int


class _Stale(Exception):
    """A record is not where the index says: the file changed under it, or is damaged there."""


class SeekIndex:
    """Where each exchange of one cassette is; `read(ids)` returns those exchanges."""

    def __init__(self, path: Location) -> None:
        self.path: Location = path if is_url(path) else Path(path)
        self.seeks = 0  # frames decoded to read records through the index
        self.scans = 0  # streaming scans instead (v1 file, or the index did not hold)
        self._lock = threading.Lock()  # a server reads from request threads while it indexes in the background
        self._reset()

    def _reset(self) -> None:
        self.frames: list[Frame] = []
        self.spots: dict[str, Spot] = {}
        self._identity: tuple[Any, ...] | None = None
        self._size = 0  # the file's size as far as it was indexed
        self._resume = 0  # the first frame not yet indexed whole
        self._last_seq = 0  # the last sequence number before it
        self._done = False  # indexed to the end of the file (as it was `_size` bytes long)
        self._version: int | None = None

    def read(self, ids: Collection[str]) -> dict[str, Exchange]:
        """The exchanges with these ids, by id; an id the cassette does not hold is left out. CassetteError (one
        line) when the file cannot be read at all."""
        wanted = set(ids)
        if not wanted:
            return {}
        with self._lock:
            try:
                found = self._seek(wanted)
            except _Stale:
                self._reset()
                found = None
            if found is None:
                self.scans += 1
        return scan(self.path, wanted) if found is None else found

    def parts(self, rid: str, seqs: Sequence[int]) -> Iterator[Part]:
        """The part records `seqs` of exchange `rid` (its `response.parts`, as written), in order, reading one frame
        at a time: a frame's bytes and its parts are held, never the whole body (replay serves a large answer so).
        CassetteError (one line) if one is not where the index says (the file changed, or is damaged there)."""
        with self._lock:
            try:
                if not self._prepare():
                    raise CassetteError(f"{self.path}: a v1 cassette holds no part records")
                if rid not in self.spots and not self._done:
                    self._extend({rid})
            except _Stale:
                self._reset()
                raise CassetteError(f"{self.path}: exchange {rid}: changed while it was read") from None
            starts = [f.first_seq for f in self.frames]
        groups: list[tuple[int, list[int]]] = []
        for seq in seqs:
            k = bisect.bisect_right(starts, seq) - 1
            if groups and groups[-1][0] == k:
                groups[-1][1].append(seq)
            else:
                groups.append((k, [seq]))
        n = 0
        for k, group in groups:
            with self._lock:
                try:
                    if k < 0 or k >= len(self.frames):
                        raise _Stale
                    got = self._read_parts(self.frames[k], set(group))
                except _Stale:
                    self._reset()
                    got = {}
            for seq in group:
                part = got.pop(seq, None)
                if part is None or part.n != n:
                    raise CassetteError(
                        f"{self.path}: exchange {rid}: part record {seq} of its body is not where it was indexed "
                        "(the file changed or is damaged there)"
                    )
                n += 1
                yield part

    def warm(self, frames_at_once: int = 8) -> None:
        """Index the whole file ahead of any reading (a server does this in the background), a few frames at a time
        so that a `read` from another thread waits for those only. Problems are left for a read to report."""
        while True:
            with self._lock:
                try:
                    if not self._prepare() or self._done:
                        return
                    self._extend(None, frames_at_once)
                except (CassetteError, OSError):
                    return

    # -- the index -----------------------------------------------------------------------------------------------

    def _prepare(self) -> bool:
        """Check the file against the index (starting again if it was replaced); False for a file that cannot be
        indexed (v1)."""
        identity, size = _identity(self.path)
        if self._identity is not None and (identity != self._identity or size < self._size):
            self._reset()  # replaced (a closed recording is rewritten) or cut: the offsets are no longer valid
        self._identity = identity
        if size > self._size:
            self._done = False
        if self._version is None:
            self._version = CassetteReader(self.path).version
        if self._version < 2:
            return False
        if self._resume >= size:
            self._done = True
        return True

    def _seek(self, wanted: set[str]) -> dict[str, Exchange] | None:
        if not self._prepare():
            return None
        if not wanted <= self.spots.keys() and not self._done:
            self._extend(wanted)
        by_frame: dict[int, dict[int, str]] = defaultdict(dict)
        for rid in wanted:
            spot = self.spots.get(rid)
            if spot is not None:
                by_frame[spot.frame][spot.seq] = rid
        found: dict[str, Exchange] = {}
        for k, seqs in by_frame.items():
            found.update(self._read_frame(self.frames[k], seqs))
        for record in found.values():
            if record.response.parts:
                self._attach(record)
        return found

    def _attach(self, record: Exchange) -> None:
        """Read the part records of an exchange whose body was written in parts (they come before it: their frames
        are indexed) and put its body back together; _Stale if one is not where the index says."""
        starts = [f.first_seq for f in self.frames]
        by_frame: dict[int, set[int]] = defaultdict(set)
        for seq in record.response.parts:
            k = bisect.bisect_right(starts, seq) - 1
            if k < 0:
                raise _Stale
            by_frame[k].add(seq)
        parts = {}
        for k, seqs in by_frame.items():
            parts.update(self._read_parts(self.frames[k], seqs))
        try:
            attach_parts(record, [parts.get(seq) for seq in record.response.parts])
        except PartsMissing:
            raise _Stale from None

    def _extend(self, wanted: set[str] | None, limit: int | None = None) -> None:
        """Index frames from where the last search stopped, until every wanted id is found, `limit` frames were
        indexed, or the file ends."""
        buf, base = _tail(self.path, self._resume)  # the file from `base` on
        try:
            self._size = base + len(buf)
            unframer = Unframer(last_seq=self._last_seq)
            start = self._resume
            in_header = start == 0  # the first frame holds the header alone
            noted: list[tuple[str | None, int]] = []
            count = 0
            for event in frames.walk(buf, start - base):
                if isinstance(event, frames.Data):
                    if not in_header:
                        noted.extend(_ids(unframer.feed(event.data)))
                    continue
                if not in_header:
                    noted.extend(_ids(unframer.finish()))
                in_header = False
                if isinstance(event, frames.FrameEnd):
                    end = base + event.end
                elif isinstance(event, frames.Skipped):
                    end = base + event.resume
                else:  # Cut: the file ends inside this frame; the next search reads it again
                    end = self._size
                if noted:
                    self.frames.append(Frame(start, end, noted[0][1]))
                    for rid, seq in noted:
                        if rid is not None:
                            self.spots[rid] = Spot(len(self.frames) - 1, seq)
                    noted = []
                if isinstance(event, frames.Cut):
                    break
                frames.release(buf, start - base, end - base)
                self._resume, self._last_seq, start = end, unframer.last_seq, end
                count += 1
                if (wanted is not None and wanted <= self.spots.keys()) or count == limit:
                    return
            self._done = True
        finally:
            if isinstance(buf, mmap.mmap):
                buf.close()

    def _read_parts(self, frame: Frame, seqs: set[int]) -> dict[int, Part]:
        data = _part(self.path, frame.start, frame.end)
        self.seeks += 1
        parts: dict[int, Part] = {}
        for seq, payload in _frame_payloads(data, frame.first_seq, seqs).items():
            try:
                part = part_of_payload(payload)
            except PAYLOAD_ERRORS:
                part = None
            if part is None:
                raise _Stale
            parts[seq] = part
        return parts

    def _read_frame(self, frame: Frame, seqs: dict[int, str]) -> dict[str, Exchange]:
        data = _part(self.path, frame.start, frame.end)
        self.seeks += 1
        unframer = Unframer(last_seq=frame.first_seq - 1)
        found: dict[str, Exchange] = {}
        assert self._version is not None
        for event in frames.walk(data):
            records = unframer.feed(event.data) if isinstance(event, frames.Data) else unframer.finish()
            for seq, payload in records:
                rid = seqs.get(seq)
                if rid is None:
                    continue
                try:
                    record = exchange_of_payload(payload, self._version)
                except PAYLOAD_ERRORS:
                    record = None
                if record is None or record.id != rid:
                    raise _Stale
                found[rid] = record
            if len(found) == len(seqs) or not isinstance(event, frames.Data):
                break
        if len(found) != len(seqs):
            raise _Stale
        return found


def _frame_payloads(data: bytes, first_seq: int, seqs: Collection[int]) -> dict[int, bytes | memoryview]:
    """The payloads of the records with these sequence numbers in one frame's bytes (checksums checked)."""
    unframer = Unframer(last_seq=first_seq - 1)
    got: dict[int, bytes | memoryview] = {}
    for event in frames.walk(data):
        records = unframer.feed(event.data) if isinstance(event, frames.Data) else unframer.finish()
        for seq, payload in records:
            if seq in seqs:
                got[seq] = payload
        if len(got) == len(seqs) or not isinstance(event, frames.Data):
            break
    return got


def _ids(records: Any) -> list[tuple[str | None, int]]:
    """(id, seq) of framed records (their checksums already checked): the id of an exchange, None for any other
    record (a frame's first record, whatever it is, says which sequence numbers the frame holds: part records are
    found through it)."""
    got: list[tuple[str | None, int]] = []
    for seq, payload in records:
        try:
            head = _ID.decode(columns.record_part(payload))
        except (msgspec.DecodeError, ValueError, RecursionError):
            continue  # the reader counts it as malformed; it is no exchange the index could point at
        got.append((head.id if head.kind == "exchange" else None, seq))
    return got


def scan(path: Location, wanted: Collection[str]) -> dict[str, Exchange]:
    """The exchanges with these ids by a streaming read from the start, stopping once all are found."""
    want = set(wanted)
    found: dict[str, Exchange] = {}
    for record in CassetteReader(path):
        rid = record.id
        if rid in want:
            found[rid] = record
            if len(found) == len(want):
                break
    return found


# -- the file, local or at a URL ---------------------------------------------------------------------------------


def _identity(path: Location) -> tuple[tuple[Any, ...], int]:
    if is_url(path):
        url = str(path)
        fs = filesystem(url)
        try:
            fs.invalidate_cache(url)
            info = fs.info(url)
        except Exception as exc:
            raise CassetteError(explain(url, exc)) from None
        return (info.get("ETag") or info.get("mtime") or info.get("LastModified"),), int(info.get("size") or 0)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise CassetteError(f"{path}: cannot open: {exc.strerror}") from None
    return (st.st_dev, st.st_ino), st.st_size


def _tail(path: Location, start: int) -> tuple[mmap.mmap | bytes, int]:
    """The file's bytes from `start` on, and the offset they start at: a local file is mapped whole (it costs no
    memory), an object is fetched from `start` in one ranged read."""
    if is_url(path):
        url = str(path)
        try:
            data: bytes = filesystem(url).cat_file(url, start=start)
        except Exception as exc:
            raise CassetteError(explain(url, exc)) from None
        return data, start
    try:
        return frames.open_bytes(path), 0
    except OSError as exc:
        raise CassetteError(f"{path}: cannot open: {exc.strerror}") from None


def _part(path: Location, start: int, end: int) -> bytes:
    """Bytes start..end of the file: one ranged read, never the whole file."""
    if is_url(path):
        url = str(path)
        try:
            data: bytes = filesystem(url).cat_file(url, start=start, end=end)
        except Exception as exc:
            raise CassetteError(explain(url, exc)) from None
        return data
    try:
        with open(path, "rb") as fh:
            fh.seek(start)
            return fh.read(end - start)
    except OSError as exc:
        raise CassetteError(f"{path}: cannot open: {exc.strerror}") from None
