"""Walking the zstd frames of a cassette file: decompressed data frame by frame, and where damage was skipped.

`decompressobj()` is used, not `stream_reader()`: on a frame that is not finished (a live or killed recording),
`stream_reader.read(n)` can return short of the last flushed block when the decompressed size ends just past a
multiple of `n`, and that last block holds the last exchange. A `decompressobj()` returns every flushed block.

After damage that zstd detects (or bytes that are not zstd at all), the walk resumes at the next zstd frame magic
number: in a v2 file every frame starts at a record boundary, so the records of every later frame are recovered.
"""

from __future__ import annotations

import mmap
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, cast

import zstandard

from bench.core.cassette import repair
from bench.core.cassette.format import ZSTD_MAGIC
from bench.core.storage import is_url, open_read, prefetched

# Compressed bytes fed per call adapt to the ratio seen so far, so that one call's output stays near OUT_TARGET: a
# fixed piece let a highly repetitive cassette (synthetic or templated traffic compresses 1000x and more) allocate
# hundreds of MiB in one call. A zstd block decodes to at most 128 KiB from as little as 4 bytes (a run), so
# MIN_PIECE bytes decode to at most ~2 MiB; a call starts there and the piece doubles while the output stays small.
PIECE = 1 << 17
MIN_PIECE = 1 << 6
OUT_TARGET = 1 << 21
# A frame decoded whole (its end known from its blocks' headers) comes out this much at a time. Reading the benchmark's
# cassette (records of ~100 KB): 2 MiB is ~5% faster than 1 MiB once the process's heap has grown, but a process's
# first read then grows the heap in more steps (~20,000 page faults against ~9,000): 1 MiB is as fast or faster
# there; 128 KiB and below ~10% slower, 8 MiB ~25% slower.
WHOLE_OUT = 1 << 20
# After damage, the damaged frame is decoded again this many compressed bytes at a time.
SALVAGE_STEP = 512
# What one frame may decompress to: a frame bench writes holds 4 MiB of records plus one batch (the writer's queue,
# 64 MiB) or one record (at most envelope.MAX_RECORD). Past this a frame is not one bench wrote (a decompression
# bomb: a few KiB that decode to gigabytes): the rest of it is skipped, undecoded, as damage.
MAX_FRAME_OUT = 512 << 20
# How far past the first frame's start its repair frame is looked for (a header frame is a few hundred bytes).
HEADER_REACH = 1 << 16


@dataclass(frozen=True)
class Data:
    frame: int
    data: bytes


@dataclass(frozen=True)
class FrameEnd:
    frame: int
    end: int = 0  # offset just past the frame: where the next one starts (bench.core.cassette.seek indexes by it)
    # False when the file has repair frames and this one has none after it: a live recording's newest frame, or a
    # file cut just after this frame (a closed file's last frame, its end record's, always has one).
    guarded: bool = True


@dataclass(frozen=True)
class Cut:
    """The file ends inside this frame (a recording still being written, or killed)."""

    frame: int


@dataclass(frozen=True)
class Skipped:
    """Bytes from `offset` to `resume` (the next frame, or the end of the file) could not be read."""

    frame: int
    offset: int
    resume: int
    why: str


Event = Data | FrameEnd | Cut | Skipped


def open_bytes(path: Path | str) -> mmap.mmap | bytes:
    """The file's bytes, mapped (not read) so that a large cassette costs no memory; b"" for an empty file. An
    object-storage URL is read whole in one request (a cassette is compressed; per-request latency dominates)."""
    if isinstance(path, str) and is_url(path):
        ahead = prefetched(path)
        if ahead is not None:
            return ahead
        with open_read(path) as remote:
            data: bytes = remote.read()
            return data
    with open(path, "rb") as f:
        if f.seek(0, 2) == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def walk(buf: mmap.mmap | bytes, start: int = 0) -> Iterator[Event]:
    """Every frame's decompressed data in order, from the frame at `start` (a frame's first byte; frame numbers
    count from there); damage and junk become `Skipped` and the walk goes on. A frame followed by a repair frame
    (bench.core.cassette.repair) with one damaged stripe is rebuilt before it is decoded; a file whose first frame
    has one has them all, so only then are they looked for (a frame's `FrameEnd` is past its repair frame)."""
    n = len(buf)
    pos = start
    frame = 0
    dctx = zstandard.ZstdDecompressor()
    repairs: bool | None = None  # unknown until the first frame ends
    while pos < n:
        head = buf[pos : pos + 4]
        if head == repair.MAGIC:  # a repair frame after a frame walked over as damaged: nothing to read in it
            pos = max(pos + 1, repair.skip(buf, pos))
            continue
        if head != ZSTD_MAGIC:
            resume = _next_magic(buf, pos + 1)
            yield Skipped(frame, pos, resume, "bytes that are not zstd data")
            pos = resume
            frame += 1
            continue
        src, base, end = _source(buf, pos, repairs is not False, repairs is None)
        decoded = _Decoded(pos)
        try:
            end = yield from _frame(dctx, src, base, end, n, frame, decoded)
        except zstandard.ZstdError as exc:
            # The failing call's output is lost with its exception: decode the frame again in small steps to get
            # every block before the damage.
            rest, bad = _salvage(dctx, buf, pos, decoded.fed, decoded.given)
            if rest:
                yield Data(frame, rest)
            resume = _next_magic(buf, pos + 1)
            yield Skipped(frame, min(bad, resume), resume, f"damaged zstd data ({_short(exc)})")
            pos = resume
            frame += 1
            continue
        if decoded.bomb:
            resume = _next_magic(buf, pos + 1)
            why = f"a frame that decompresses past {MAX_FRAME_OUT >> 20} MiB (a decompression bomb?)"
            yield Skipped(frame, pos, resume, why)
            pos = resume
            frame += 1
            continue
        if end is None:
            # Normal for a live or killed recording (its last frame). A frame that does not end although another
            # starts after it was damaged (a block header that now claims more bytes): resume at the next one.
            resume = _next_magic(buf, pos + 1)
            if resume == n:
                yield Cut(frame)
                return
            yield Skipped(frame, pos, resume, "a frame that does not end")
            pos = resume
            frame += 1
            continue
        pos = end
        if repairs is None:
            repairs = buf[pos : pos + 4] == repair.MAGIC  # (even if that one is damaged: the others are not)
        after = repair.skip(buf, pos)
        yield FrameEnd(frame, after, guarded=not repairs or after != pos)
        pos = after
        frame += 1


@dataclass
class _Decoded:
    """How far one frame's decoding got: bytes fed from the file (an offset), bytes yielded, a decompression bomb."""

    fed: int
    given: int = 0
    bomb: bool = False


def _frame(
    dctx: zstandard.ZstdDecompressor,
    src: mmap.mmap | bytes,
    base: int,
    end: int | None,
    n: int,
    frame: int,
    decoded: _Decoded,
) -> Generator[Data, None, int | None]:
    """Decode the frame at `decoded.fed` (ending at `end` if its blocks' headers say so); returns the offset just past
    it, or None if the file ends first. Raises what zstandard raises on damage and sets `decoded.bomb` past
    MAX_FRAME_OUT, as `_decode` does."""
    at = decoded.fed
    if end is not None and (yield from _whole(dctx, _Source(src, at - base, end - base), frame, decoded)):
        return end
    # Cut, damaged or a bomb: piece by piece, as far as it goes (what the whole-frame path gave is not given again).
    dobj = dctx.decompressobj()
    yield from _decode(dobj, src, base, n, frame, decoded)
    return decoded.fed - len(dobj.unused_data) if dobj.eof else None


def _frame_end(src: mmap.mmap | bytes, at: int) -> int | None:
    """Where the zstd frame at `at` ends, by its header and its blocks' headers (RFC 8878 3.1.1), or None when they
    do not say (the file ends first, a reserved bit or block type, a block larger than zstd allows): only a frame
    that ends here is decoded whole; any other is decoded piece by piece, which finds what is wrong with it."""
    head = src[at + 4 : at + 5]
    if not head or head[0] & 0x08:
        return None
    flags = head[0]
    single = flags >> 5 & 1
    pos = at + 5 + (1 - single) + _DICT_ID[flags & 3] + (_CONTENT_SIZE[flags >> 6] or single)
    limit = len(src)
    while pos + 3 <= limit:
        block = int.from_bytes(src[pos : pos + 3], "little")
        kind, size = block >> 1 & 3, block >> 3
        if kind == 3 or size > zstandard.BLOCKSIZE_MAX:
            return None
        pos += 3 + (1 if kind == 1 else size)
        if block & 1:
            pos += 4 if flags & 0x04 else 0  # the content checksum
            return pos if pos <= limit else None
    return None


_DICT_ID = (0, 1, 2, 4)
_CONTENT_SIZE = (0, 2, 4, 8)


class _Source:
    """A frame's bytes as zstandard's stream_reader reads them: a piece at a time (a view of a mapped file would
    keep it from closing while the reader lives)."""

    def __init__(self, buf: mmap.mmap | bytes, start: int, end: int) -> None:
        self.buf, self.pos, self.end = buf, start, end

    def read(self, size: int) -> bytes:
        piece = self.buf[self.pos : min(self.pos + size, self.end)]
        self.pos += len(piece)
        return piece


def _whole(
    dctx: zstandard.ZstdDecompressor, source: _Source, frame: int, decoded: _Decoded
) -> Generator[Data, None, bool]:
    """A frame whose blocks say where it ends, decompressed by a stream_reader straight into each piece's bytes
    (`decompressobj` gathers its output in pieces and joins them: a copy more, and out of the cache: ~30% of a
    read); False, having given only whole pieces it decoded, on damage or past MAX_FRAME_OUT."""
    # Any object with read() is a source for zstandard (its stubs name only IO[bytes]).
    reader = dctx.stream_reader(cast(IO[bytes], source), read_size=PIECE, read_across_frames=False, closefd=False)
    while True:
        try:
            out = reader.read(WHOLE_OUT)
        except zstandard.ZstdError:
            return False
        if not out:
            return True
        if decoded.given + len(out) > MAX_FRAME_OUT:
            return False
        decoded.given += len(out)
        yield Data(frame, out)


def _decode(
    dobj: zstandard.ZstdDecompressionObj, src: mmap.mmap | bytes, base: int, n: int, frame: int, decoded: _Decoded
) -> Iterator[Data]:
    """Decompress the frame at `decoded.fed` in pieces sized to keep each output near OUT_TARGET, until it ends, the
    file ends or it passes MAX_FRAME_OUT; raises what zstandard raises on damage (`decoded` says how far it got)."""
    size = MIN_PIECE
    done = 0
    while not dobj.eof and decoded.fed < n and not decoded.bomb:
        piece = src[decoded.fed - base : decoded.fed - base + size]
        decoded.fed += len(piece)
        out = dobj.decompress(piece)
        # Doubling, not a jump to the ratio's size: the first pieces' ratio says little about the next ones.
        if len(out) > OUT_TARGET:
            size = max(MIN_PIECE, size // 2)
        elif len(out) < OUT_TARGET // 4:
            size = min(PIECE, size * 2)
        done += len(out)
        new = done - decoded.given  # none while it decodes again what the whole-frame path gave
        if new > 0:
            decoded.given = done
            yield Data(frame, out if new >= len(out) else out[-new:])
        decoded.bomb = done > MAX_FRAME_OUT


def _source(buf: mmap.mmap | bytes, pos: int, look: bool, first: bool) -> tuple[mmap.mmap | bytes, int, int | None]:
    """Where the frame at `pos` is decoded from: the file, or (its repair frame found and one stripe of it
    damaged) the frame rebuilt, with the file offset its first byte stands for; and where the frame ends (a file
    offset) if its blocks' headers say so (`_frame_end`)."""
    end = _frame_end(buf, pos)
    if not look:
        return buf, 0, end
    # The first frame (the header) is small: its repair frame, if the file has them, is close by.
    limit = HEADER_REACH if first else len(buf)
    # A repair frame follows its frame: looked for there first (searching the frame's bytes for its magic number cost
    # ~2 us an exchange), then, when the blocks do not say where the frame ends or none is there, searched for.
    found = repair.read_at(buf, end) if end is not None and end - pos < limit else None
    if found is None or found.at - found.length != pos:
        found = repair.find(buf, pos, limit)
    if found is None or repair.intact(buf, pos, found):
        return buf, 0, end
    fixed = repair.repaired(bytes(buf[pos : found.at]), found)
    if fixed is None:
        return buf, 0, end
    fixed_end = _frame_end(fixed, 0)
    return fixed, pos, None if fixed_end is None else pos + fixed_end


def _salvage(
    dctx: zstandard.ZstdDecompressor, buf: mmap.mmap | bytes, start: int, end: int, skip: int
) -> tuple[bytes, int]:
    """The frame's output from `start` up to the first error, less its first `skip` bytes, and where the error is:
    fed SALVAGE_STEP bytes at a time, then the step that fails a byte at a time (a block comes out once all its
    bytes are in)."""
    good = start
    out = bytearray()
    for step in (SALVAGE_STEP, 1):
        dobj = dctx.decompressobj()
        out = bytearray(dobj.decompress(buf[start:good])) if good > start else bytearray()
        at = good
        try:
            while at < end and not dobj.eof:
                out += dobj.decompress(buf[at : at + step])
                at += step
                good = at
            break
        except zstandard.ZstdError:
            continue
    return bytes(out[skip:]), good


def _next_magic(buf: mmap.mmap | bytes, start: int) -> int:
    found = buf.find(ZSTD_MAGIC, start)
    return len(buf) if found < 0 else found


def _short(exc: Exception) -> str:
    text = str(exc).removeprefix("zstd decompressor error: ")
    return text.split("\n", 1)[0]


def release(buf: mmap.mmap | bytes, start: int, end: int) -> None:
    """Drop the mapped pages of a frame once read: they would otherwise stay in the process's resident set (as file
    pages, but counted in it) until the whole file had been read."""
    if isinstance(buf, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        first = start - start % mmap.PAGESIZE
        if end > first:
            buf.madvise(mmap.MADV_DONTNEED, first, end - first)
