"""Streaming cassette reader: bounded memory, every readable record returned, everything else counted.

A file cut by kill -9 (or still being written) has no end record: every record of a flushed block is returned and
`truncated` is set. A foreign file, a 0-byte file, an unknown version raise CassetteError with one line that names
the file. Damage after the header never raises: in a v2 file every record carries a checksum and a sequence number,
so a changed record is dropped (never returned changed), the records after it are recovered (in the same zstd frame
when the damage left the stream decodable, else from the next frame), and `lost` says how many records were lost.
v1 files have no checksums: damage stops the reading there and keeps what came before. `problem` is the one line
every tool prints about a file that was not read whole.
"""

from __future__ import annotations

import itertools
import mmap
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import msgpack
import msgspec
import xxhash

from bench.core.cassette import columns, frames
from bench.core.cassette.envelope import Unframer
from bench.core.cassette.format import END, EXCHANGE, FORMAT_NAME, FORMAT_VERSION, HEADER, PART, SUFFIX, ZSTD_MAGIC
from bench.core.cassette.migrate import upgrade
from bench.core.cassette.records import DamagedRecord, End, Exchange, Header, Part, Response, from_map
from bench.core.errors import CassetteError
from bench.core.storage import Location, find_urls, is_url

NO_END = "no end record (the recorder was killed or is still writing)"
# Every record after the header is an exchange, a part of one, or the end record, told apart by their `kind`.
_DECODER = msgspec.msgpack.Decoder(Exchange | End | Part)


class _ReadsUnread(Response, kw_only=True, gc=False):
    """A response whose reads are skipped undecoded (`skip_reads`): msgspec passes over them as one raw value."""

    chunks: msgspec.Raw = msgspec.Raw(b"\x90")  # type: ignore[assignment]  # replaced by [] before it is returned


class _ReadsSkipped(Exchange, tag=EXCHANGE, omit_defaults=True, gc=False):
    response: _ReadsUnread = msgspec.field(default_factory=_ReadsUnread)


_SKIPPING = msgspec.msgpack.Decoder(_ReadsSkipped)


_TIMES_MISFIT = "{} arrival time(s) for {} read(s)"


def _times_fit(record: Exchange) -> bool:
    """One arrival time per read, or none at all (an exchange recorded without times)."""
    times, chunks = record.response.chunk_us, record.response.chunks
    return not times or len(times) == len(chunks)


class PartsMissing(ValueError):
    """An exchange whose body was written in parts, not all of which were read whole."""


def attach_parts(record: Exchange, parts: list[Part | None]) -> None:
    """Put the reads of an exchange's part records (in its `response.parts` order) in front of its own, with their
    times: the exchange as the proxy saw it, byte for byte. PartsMissing if one is missing or not the one named."""
    response = record.response
    check_parts(record, parts)
    chunks: list[bytes] = []
    times: list[int] = []
    for part in parts:
        assert part is not None
        chunks += part.chunks
        times += part.chunk_us
    response.chunks = chunks + response.chunks
    response.chunk_us = times + response.chunk_us
    response.parts = []
    if len(response.chunks) != len(response.chunk_us):
        raise PartsMissing(f"exchange {record.id}: its parts' reads and times do not match")


def check_parts(record: Exchange, parts: list[Part | None]) -> None:
    """PartsMissing unless these are the exchange's part records, all there, in order."""
    if any(p is None or p.n != i or p.started != record.started for i, p in enumerate(parts)):
        raise PartsMissing(f"exchange {record.id}: part record(s) of its body lost")


class CassetteReader:
    """Iterate a cassette's exchange records. `header` is read on open; `end`, `truncated`, `problem` once read.

    `part_bodies=False`: an exchange whose body was written in parts is returned with only its own reads and its
    `response.parts` left as written (every part checked to be there), never its whole body: replay indexes large
    answers this way and reads their parts from the file as it serves them (bench.proxy.replay_body)."""

    def __init__(
        self, path: Path | str, *, part_bodies: bool = True, skip_reads: Callable[[bytes], bool] | None = None
    ) -> None:
        self.part_bodies = part_bodies
        # Asked with each exchange's payload digest: True returns it without its reads (`chunks`, `chunk_us` empty;
        # every other field decoded and checked, the reads' and times' counts checked to agree). For a caller that
        # holds what it needs of the reads under that digest (the parse cache); `whole()` decodes them after all.
        self.skip_reads = skip_reads
        self._digest: bytes | None = None
        # A URL (s3://, memory://, ...) is read through fsspec (bench.core.storage); anything else is a local path.
        self.path: Path | str = path if is_url(path) else Path(path)
        self.end: End | None = None
        self.truncated = False  # no end record, or damage: the file was not read whole
        self._last_guarded = True  # the last frame walked had its repair frame (or the file has none)
        self.error: str | None = None  # what was wrong, in words (`problem` is the same with the file's name)
        self.lost = 0  # records known to be lost to damage (v2: exact, from the sequence numbers)
        self.damaged = False  # damage was found (not only a missing end record)
        self.exchanges = 0
        self.raw_size = 0
        self._damage: list[str] = []
        self._unknown: Counter[str] = Counter()
        self._bad_records = 0
        self._bad_why: str | None = None  # what was wrong with the first malformed record, in one line
        self._bad_bytes = 0
        self._parts: dict[int, Part] = {}  # part records read, by seq, until their exchange claims them
        self._part_bytes: dict[int, int] = {}  # their body bytes (a part kept without its reads: part_bodies=False)
        self._partless = 0  # exchanges dropped: a part of their body was lost
        self._released = 0  # the mapped file's pages before this offset were let go (frames.release)
        self._payload: bytes | memoryview | None = None  # the checked payload of the exchange last returned
        self._buf = self._open()
        self._events = frames.walk(self._buf)
        self._pending: list[frames.Event] = []
        self._unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=1 << 31)
        first = self._read_header()
        if first is None:
            # The first frame is damaged. A v2 file keeps its records in later frames: read those.
            self.version = FORMAT_VERSION
            self.header = Header()
            return
        self._accept_header(first)

    def _open(self) -> mmap.mmap | bytes:
        """The file's bytes (mapped when local); a file that cannot be a cassette is one line saying why."""
        try:
            buf = frames.open_bytes(self.path)
        except OSError as exc:
            raise CassetteError(f"{self.path}: cannot open: {exc.strerror}") from None
        if not buf:
            raise CassetteError(
                f"{self.path}: 0-byte file, holds nothing (its recorder could not write the header); delete it"
            )
        if buf[:4] != ZSTD_MAGIC and buf.find(ZSTD_MAGIC) < 0:
            raise CassetteError(
                f"{self.path}: not a bench cassette (not zstd-compressed); pass a {SUFFIX} file bench wrote"
            )
        return buf

    def _accept_header(self, first: Any) -> None:
        """Check the first record is a cassette header of a version this bench reads, and keep it (a malformed one
        is damage said, not an error: the exchanges do not depend on it)."""
        if not isinstance(first, dict) or first.get("kind") != HEADER or first.get("format") != FORMAT_NAME:
            raise CassetteError(f"{self.path}: not a bench cassette (no cassette header); pass a file bench wrote")
        version = first.get("version")
        if not isinstance(version, int) or version < 1:
            raise CassetteError(f"{self.path}: bad format version {version!r}; the file is damaged")
        if version > FORMAT_VERSION:
            raise CassetteError(
                f"{self.path}: format version {version} is newer than this bench reads ({FORMAT_VERSION}); "
                "upgrade bench"
            )
        self.version = version
        try:
            self.header = from_map(Header, upgrade(first, version))
        except DamagedRecord as exc:
            # The exchanges do not depend on it: they are still read, and the damage is said.
            self._damage.append(f"header malformed ({exc})")
            self.header = Header(version=version)
        if version >= 2:
            # v2's header frame holds the header alone and ends with a checksum: check it before trusting the header.
            event = next(self._events, None)
            if isinstance(event, frames.Skipped):
                self._skipped(event)
                self._damage.insert(0, "header damaged")
                self.header = Header(version=version)
            elif event is not None:
                self._pending.append(event)

    def _read_header(self) -> Any:
        """The first msgpack object of the first frame, or None if damage took it."""
        for event in self._events:
            if isinstance(event, frames.Data):
                self.raw_size += len(event.data)
                self._unpacker.feed(event.data)
                try:
                    return self._unpacker.unpack()
                except msgpack.OutOfData:
                    continue
                except (msgpack.UnpackException, ValueError, TypeError):
                    raise CassetteError(
                        f"{self.path}: not a bench cassette (no cassette header); pass a file bench wrote"
                    ) from None
            if isinstance(event, frames.Skipped):
                if event.resume >= len(self._buf):
                    raise CassetteError(
                        f"{self.path}: damaged inside its header and no later part is readable; "
                        "it holds no exchanges that can be read"
                    )
                self._skipped(event)
                self._damage.insert(0, "header unreadable")
                return None
            if isinstance(event, frames.Cut):
                self._pending.append(event)
                break
            if isinstance(event, frames.FrameEnd):
                break
        raise CassetteError(f"{self.path}: cut before the end of its header; it holds no exchanges")

    # -- iteration -----------------------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Exchange]:
        # v2's generator is returned as it is: one generator less to pass each of thousands of records through.
        return self._iter_v2() if self.version > 1 else self._v1()

    def _done(self) -> None:
        self._conclude()
        if not isinstance(self._buf, bytes):
            self._buf.close()  # the mapping holds a file descriptor: a folder of thousands must not run out

    def _v1(self) -> Iterator[Exchange]:
        for record in self._iter_v1():
            self.exchanges += 1
            yield record
        self._done()

    def _iter_v1(self) -> Iterator[Exchange]:
        """v1: one msgpack stream across the file's frames, no checksums; damage ends the reading."""
        unpacker = self._unpacker
        # chain, not a list: the rest of the file is decoded as it is read, never held whole
        events: Iterator[frames.Event] = itertools.chain([frames.Data(0, b""), *self._pending], self._events)
        for event in events:
            if isinstance(event, frames.Skipped):
                self._skipped(event)
                return
            if not isinstance(event, frames.Data):
                continue
            self.raw_size += len(event.data)
            unpacker.feed(event.data)  # the first, empty, drains what was read with the header
            try:
                for obj in unpacker:
                    record = self._accept(obj)
                    if record is not None:
                        yield record
                    elif self._bad_records:
                        self._damage.append("a damaged record; v1 files cannot be read past damage")
                        return
            except (msgpack.UnpackException, ValueError, TypeError) as exc:
                self._damage.append(f"a damaged record ({exc}); v1 files cannot be read past damage")
                return
        if unpacker.tell() < self.raw_size:
            self._damage.append("cut inside a record")

    def _iter_v2(self) -> Iterator[Exchange]:
        unframer = Unframer()
        events: Iterator[frames.Event] = itertools.chain(self._pending, self._events)
        header_frame = not self._damage
        for event in events:
            if header_frame:
                # The header's frame holds the header alone; anything after it in that frame is not a record.
                if isinstance(event, frames.Data):
                    self.raw_size += len(event.data)
                    self._bad_bytes += len(event.data)
                    continue
                header_frame = False
                if isinstance(event, frames.FrameEnd):
                    continue
            if isinstance(event, frames.Data):
                self.raw_size += len(event.data)
                # Each record decoded here, not in a generator of its own: this loop is the read's per-record cost.
                for seq, payload in unframer.feed(event.data):
                    record = self._decode(seq, payload)
                    if record is not None:
                        self.exchanges += 1
                        yield record
                        self._payload = None
                continue
            yield from self._finish_frame(unframer)
            if isinstance(event, frames.Skipped):
                self._skipped(event)
            elif isinstance(event, frames.FrameEnd):
                # Walked: its pages leave the resident set (replay's index reads a folder of large answers so).
                frames.release(self._buf, self._released, event.end)
                self._released = event.end
                self._last_guarded = event.guarded
        yield from self._finish_frame(unframer)
        self.lost += unframer.lost
        self._bad_bytes += unframer.bad_bytes
        self._done()

    def _finish_frame(self, unframer: Unframer) -> Iterator[Exchange]:
        """The exchanges of the records the end of a frame (or of the file) gives."""
        for seq, payload in unframer.finish():
            record = self._decode(seq, payload)
            if record is not None:
                self.exchanges += 1
                yield record
                self._payload = None

    def _decode(self, seq: int, payload: bytes | memoryview) -> Exchange | None:
        """The exchange a checked payload holds, every field's type and bound checked as it is decoded; None for the
        end record, a part record (kept for its exchange), a kind this bench does not know or a malformed record."""
        if self.skip_reads is not None and self.version >= FORMAT_VERSION:
            self._digest = xxhash.xxh3_128_digest(payload)
            if self.skip_reads(self._digest):
                skeleton = self._without_reads(payload)
                if skeleton is not None:
                    return skeleton
        try:
            packed, times = columns.split(payload)
        except ValueError as exc:
            self._malformed(str(exc))
            return None
        if self.version < FORMAT_VERSION:  # pragma: no cover - no v2 layout with an older version exists yet
            return self._from_map(packed, times)
        try:
            # The fast path: msgpack straight into the typed record, every field's type and bound checked on the way.
            record = _DECODER.decode(packed)
        except RecursionError:
            self._malformed("nested too deep to decode")
            return None
        except msgspec.DecodeError as exc:
            self._undecodable(packed, exc)
            return None
        if isinstance(record, Exchange):
            response = record.response
            if times is not None:
                response.chunk_us = times
            if response.parts:
                return self._with_parts(record)
            if response.chunk_us and len(response.chunk_us) != len(response.chunks):  # _times_fit, inlined
                self._malformed(_TIMES_MISFIT.format(len(response.chunk_us), len(response.chunks)))
                return None
            self._payload = payload
            return record
        if isinstance(record, End):
            self.end = record
            return None
        if not self.part_bodies:
            self._part_bytes[seq] = sum(map(len, record.chunks))
            record.chunks, times = [], None
        if times is not None:
            record.chunk_us = times
        self._parts[seq] = record
        return None

    def _without_reads(self, payload: bytes | memoryview) -> Exchange | None:
        """The exchange without its reads, or None: not a plain exchange with a uint32 time column and reads that
        decode as such (a part record, the end record, parts, damage): the whole decode then reads and judges it."""
        try:
            column, count = columns.counted(payload)
            record = _SKIPPING.decode(column)
        except (ValueError, RecursionError, msgspec.DecodeError):
            return None
        response = record.response
        reads = _array_len(response.chunks)
        times = len(response.chunk_us) if count is None else count  # no column: the times the map held, if any
        if response.parts or reads is None or times not in (0, reads):
            return None
        response.chunks, response.chunk_us = [], []  # type: ignore[assignment]
        self._payload = payload
        return record

    def whole(self, record: Exchange) -> Exchange:
        """The exchange last returned, with its reads: decoded now when they were skipped (`skip_reads`)."""
        if not isinstance(record, _ReadsSkipped) or self._payload is None:
            return record
        try:
            full = exchange_of_payload(self._payload, self.version)
        except PAYLOAD_ERRORS:
            full = None
        if full is None:
            # Its reads were skipped because a parse is held under this payload's digest, and such a parse is kept
            # only for a payload that decoded whole: only another payload with the same 128-bit digest gets here.
            raise CassetteError(f"{self.path}: exchange {record.id!r}: its reads do not decode; the file is damaged")
        return full

    def _undecodable(self, packed: bytes | memoryview, exc: msgspec.DecodeError) -> None:
        """Not a record of a kind this bench knows, or a known kind with fields of other types: find out which."""
        try:
            obj = msgpack.unpackb(packed, raw=False)
        except (msgpack.UnpackException, ValueError, TypeError):
            self._malformed(str(exc))
            return
        kind = obj.get("kind") if isinstance(obj, dict) else None
        if isinstance(kind, str) and kind not in (EXCHANGE, END, PART):
            self._unknown[kind] += 1  # written by a newer bench: not damage, but said
        else:
            self._malformed(str(exc))

    def _with_parts(self, record: Exchange) -> Exchange | None:
        """An exchange whose body was written in part records: with their reads put in front (or, part_bodies=False,
        only checked to be there); None if one is missing. No one payload holds it: `digest` is None for it."""
        try:
            parts = [self._parts.pop(s, None) for s in record.response.parts]
            for s in record.response.parts:
                self._part_bytes.pop(s, None)
            if self.part_bodies:
                attach_parts(record, parts)
            else:
                check_parts(record, parts)
        except PartsMissing:
            self._partless += 1
            return None
        if self.part_bodies and not _times_fit(record):
            self._malformed(_TIMES_MISFIT.format(len(record.response.chunk_us), len(record.response.chunks)))
            return None
        return record

    def digest(self) -> bytes | None:
        """XXH3-128 of the payload of the exchange last returned, as its checksum verified it: a key for what is
        derived from the record alone (bench.scorer.parse_cache). None for an exchange whose body came in part records
        or from a v1 file (no checked payload), and outside the iteration."""
        if self._payload is None:
            return None
        if self._digest is not None and self.skip_reads is not None:
            return self._digest  # computed when the payload was read
        return xxhash.xxh3_128_digest(self._payload)

    def _from_map(self, packed: bytes | memoryview, times: list[int] | None) -> Exchange | None:
        try:
            obj = msgpack.unpackb(packed, raw=False)
            if times is not None:
                obj["response"]["chunk_us"] = times
        except (msgpack.UnpackException, ValueError, TypeError, KeyError, IndexError) as exc:
            self._malformed(str(exc))
            return None
        return self._accept(obj)

    def _accept(self, obj: Any) -> Exchange | None:
        """An older version's record (a map) migrated and typed: an exchange to return, or None (the end record, an
        unknown kind, or a malformed record)."""
        kind = obj.get("kind") if isinstance(obj, dict) else None
        if kind == EXCHANGE:
            try:
                record = from_map(Exchange, upgrade(obj, self.version))
            except DamagedRecord as exc:
                self._malformed(str(exc))
                return None
            if not _times_fit(record):
                self._malformed(_TIMES_MISFIT.format(len(record.response.chunk_us), len(record.response.chunks)))
                return None
            return record
        if kind == END:
            try:
                self.end = from_map(End, obj)
            except DamagedRecord as exc:
                self._malformed(str(exc))
        elif isinstance(kind, str):
            self._unknown[kind] += 1  # written by a newer bench: not damage, but said
        else:
            self._malformed("not a map with a kind")
        return None

    def _malformed(self, why: str) -> None:
        self._bad_records += 1
        if self._bad_why is None:
            self._bad_why = why.split("\n", 1)[0]

    def _skipped(self, event: frames.Skipped) -> None:
        self._damage.append(f"{event.why} at byte {event.offset}, {event.resume - event.offset} byte(s) skipped")

    def _conclude(self) -> None:
        parts = list(self._damage)
        if self.lost:
            parts.append(f"{self.lost} record(s) lost to damage")
        if self._bad_records:
            parts.append(f"{self._bad_records} malformed record(s) skipped (first: {self._bad_why})")
        if self._bad_bytes and not self._damage:
            parts.append(f"{self._bad_bytes} damaged byte(s) skipped")
        if self._partless:
            parts.append(f"{self._partless} exchange(s) dropped: part record(s) of their body lost to damage")
        if self._unknown:
            kinds = ", ".join(sorted(self._unknown))
            parts.append(f"{sum(self._unknown.values())} record(s) of a kind this bench does not know ({kinds})")
        self.damaged = bool(self._damage or self.lost or self._bad_records or self._bad_bytes or self._partless)
        if self._parts:
            # An exchange killed mid-answer (or still running) had written part of its body: it is in-flight loss.
            open_ = len({p.started for p in self._parts.values()})
            size = sum(self._part_bytes.get(seq, sum(map(len, p.chunks))) for seq, p in self._parts.items())
            parts.append(
                f"{len(self._parts)} part record(s) ({size} body bytes) of {open_} exchange(s) that never ended "
                "(in flight when the recording stopped) skipped"
            )
            self._parts, self._part_bytes = {}, {}
        if self.end is None:
            parts.append(NO_END if not self.damaged else "no end record: records after the last one read may be lost")
        cut_after_end = self.end is not None and not self._last_guarded
        if cut_after_end:
            parts.append("cut after its end record (its repair frame is missing; every record was read): copy it again")
        self.truncated = self.damaged or self.end is None or cut_after_end
        self.error = "; ".join(parts) or None

    @property
    def problem(self) -> str | None:
        """One line naming the file, what was read, and what was skipped; None when the file was read whole."""
        if self.error is None:
            return None
        return f"{self.path}: read {self.exchanges} exchange(s); {self.error}"


def _array_len(raw: msgspec.Raw) -> int | None:
    """How many items a msgpack array holds, from its header; None if it is not one."""
    view = memoryview(raw)
    if not view:
        return None
    first = view[0]
    if 0x90 <= first <= 0x9F:
        return first & 0x0F
    if first == 0xDC and len(view) >= 3:
        return int.from_bytes(view[1:3], "big")
    if first == 0xDD and len(view) >= 5:
        return int.from_bytes(view[1:5], "big")
    return None


# What a damaged payload can raise when decoded (RecursionError: nested past what the decoder follows).
PAYLOAD_ERRORS = (
    msgspec.DecodeError,
    msgpack.UnpackException,
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    RecursionError,
)


def exchange_of_payload(payload: bytes | memoryview, version: int) -> Exchange | None:
    """A record's payload (its checksum already checked) as the exchange it holds; None for another kind of record.
    Raises one of PAYLOAD_ERRORS when it is not a well-formed record (for one line on what was wrong, read the file
    with CassetteReader)."""
    packed, times = columns.split(payload)
    if version < FORMAT_VERSION:  # pragma: no cover - no v2 layout with an older version exists yet
        obj = msgpack.unpackb(packed, raw=False)
        if times is not None:
            obj["response"]["chunk_us"] = times
        if not isinstance(obj, dict) or obj.get("kind") != EXCHANGE:
            return None
        return from_map(Exchange, upgrade(obj, version))
    record = _DECODER.decode(packed)
    if not isinstance(record, Exchange):
        return None
    if times is not None:
        record.response.chunk_us = times
    if not record.response.parts and not _times_fit(record):
        raise ValueError(_TIMES_MISFIT.format(len(record.response.chunk_us), len(record.response.chunks)))
    return record


def record_of_payload(payload: bytes | memoryview) -> Exchange | Part | End:
    """A v2 record's payload (its checksum already checked) as the record it holds, arrival times put back. Raises
    one of PAYLOAD_ERRORS when it is not a well-formed record of a kind this bench reads."""
    packed, times = columns.split(payload)
    record: Exchange | Part | End = _DECODER.decode(packed)
    if isinstance(record, Exchange):
        if times is not None:
            record.response.chunk_us = times
        if not record.response.parts and not _times_fit(record):
            raise ValueError(_TIMES_MISFIT.format(len(record.response.chunk_us), len(record.response.chunks)))
    elif isinstance(record, Part) and times is not None:
        record.chunk_us = times
    return record


def part_of_payload(payload: bytes | memoryview) -> Part | None:
    """A record's payload as the part record it holds; None for another kind. Raises one of PAYLOAD_ERRORS when it
    is not a well-formed record."""
    packed, times = columns.split(payload)
    record = _DECODER.decode(packed)
    if not isinstance(record, Part):
        return None
    if times is not None:
        record.chunk_us = times
    return record


def read_cassette(path: Path | str) -> tuple[Header, list[Exchange]]:
    """Convenience: the header and all exchanges (small files, tests)."""
    reader = CassetteReader(path)
    return reader.header, list(reader)


def find_cassettes(paths: list[Path] | list[str]) -> list[Path]:
    """Every cassette under the given files or folders, sorted, so that runs are deterministic."""
    found: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found.extend(sorted(p.rglob(f"*{SUFFIX}")))
        elif p.exists():
            found.append(p)
        else:
            raise CassetteError(f"{p}: no such file or directory; pass a cassette file or a folder of them")
    return found


def find_locations(locations: Sequence[Location]) -> list[Location]:
    """Every cassette under the given files, folders or URL prefixes, each sorted, so that runs are deterministic."""
    found: list[Location] = []
    for loc in locations:
        if is_url(loc):
            found.extend(find_urls(str(loc), SUFFIX))
        else:
            found.extend(find_cassettes([Path(loc)]))
    return found
