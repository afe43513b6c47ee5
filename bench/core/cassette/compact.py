"""Recompressing a closed cassette, and writing a whole v2 file at once (`bench cassette upgrade`).

While recording, the writer compresses at a fast level and ends a zstd block after every batch (kill -9 safety).
Once the end record is written neither is needed: the same framed records, recompressed in frames of SEGMENT_BYTES
without block flushes at a higher level, take 10-25% less space. The new file is written beside the old one, every
frame is decompressed and compared with the original bytes, and only then does it replace the old file (rename:
a crash at any point leaves one whole cassette).

Closing time is bounded: the level is chosen by the file's size (CLOSE_LEVELS), a file past the last size is kept as
written, and so is every written frame that compressed less than MIN_RATIO (random or already-compressed bytes,
which a higher level does not shrink: it only spends seconds on them). The file is recompressed frame by frame, so
it holds one written frame's records in memory, not the whole file's.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import zstandard

from bench.core.cassette import frames, repair
from bench.core.cassette.envelope import record_ends
from bench.core.cassette.format import SEGMENT_BYTES
from bench.core.cassette.records import Header, encode
from bench.core.close_level import close_level_setting
from bench.core.errors import BenchError

# (raw bytes up to, zstd level), measured on a 2-core machine (benchmarks/cassette_size.py, benchmarks/close_time.py):
# level 19 takes ~1.6 s of CPU for the 3.2 MB shipped recording (28.3x, 15 would give 27.4x). On text, CPU per MB:
# level 12 ~22 MB/s, 15 only ~1.5 MB/s (a 50 MB answer: 30 s and more); past 32 MiB a higher level gains ~7% over
# the written level 3 (level 9) for seconds of CPU per 50 MB: such files are kept as written.
CLOSE_LEVELS = ((8 << 20, 19), (32 << 20, 12))
# A written frame smaller than this many times its records is kept as it is: level 3 already did what any level can
# (random hex: 1.92x at level 3, 1.84x at 9, at a tenth of the speed).
MIN_RATIO = 3.0
ARCHIVE_LEVEL = 19
BLOCK_BYTES = 64 << 10


class NotClean(Exception):
    """The file is not a whole v2 cassette (cut, damaged): it is left as it is."""


def level_for(raw_bytes: int) -> int | None:
    level = next((level for limit, level in CLOSE_LEVELS if raw_bytes <= limit), None)
    if level is None:
        return None  # past the last size the file is kept as written, whatever the setting
    try:
        setting = close_level_setting()
    except BenchError:
        return level  # the command line refused it at its start; code that writes cassettes itself gets the default
    return level if isinstance(setting, str) else setting


def compact(path: Path, raw_bytes: int, level: int | None = None) -> bool:
    """Recompress a closed v2 cassette in place; False (file unchanged) if it is too large, not clean, or on error."""
    level = level if level is not None else level_for(raw_bytes)
    if level is None:
        return False
    buf = frames.open_bytes(path)
    try:
        replace_atomically(path, _recompressed(buf, level))
    except (OSError, NotClean):
        return False
    finally:
        if not isinstance(buf, bytes):
            buf.close()
    return True


def _recompressed(buf: mmap.mmap | bytes, level: int) -> Iterator[bytes]:
    """The header frame's bytes as written (with its repair frame), then each written frame recompressed, each with
    its repair frame (or as written, with its own, see MIN_RATIO)."""
    raw = bytearray()
    start = 0
    ended = False
    for event in frames.walk(buf):
        if isinstance(event, frames.Data) and event.frame > 0:
            raw += event.data
        elif isinstance(event, frames.FrameEnd):
            if event.frame == 0:
                yield bytes(buf[: event.end])
            elif len(raw) < MIN_RATIO * (event.end - start):
                yield bytes(buf[start : event.end])
            else:
                yield from segment_frames(raw, level)
            raw = bytearray()
            start = event.end
            ended = ended or event.frame > 0
        elif isinstance(event, frames.Cut | frames.Skipped):
            raise NotClean(type(event).__name__)
    if not ended or start != len(buf):
        raise NotClean("no frame, or bytes after the last")


def header_frame(header: Header, level: int) -> bytes:
    """The header's zstd frame and its repair frame."""
    packed = encode(header)
    frame = zstandard.ZstdCompressor(level=level, write_checksum=True).compress(packed)
    return frame + repair.repair_frame(frame)


def segment_frames(raw: bytes | bytearray, level: int) -> Iterator[bytes]:
    """Framed records in zstd frames of about SEGMENT_BYTES, split between records; each checked by decompressing,
    and followed by its repair frame (bench.core.cassette.repair).

    A block ends every ~BLOCK_BYTES and before the last record (the end record), at record boundaries: a copy of the
    file cut short loses only its last block, and a cut of its last bytes only the end record.
    """
    cctx = zstandard.ZstdCompressor(level=level)
    dctx = zstandard.ZstdDecompressor()
    view = memoryview(raw)
    ends = list(record_ends(raw))
    start = block = 0
    cobj = cctx.compressobj()
    parts: list[bytes] = []
    for i, end in enumerate(ends):
        last = i == len(ends) - 1
        finish = last or end - start >= SEGMENT_BYTES
        flush_block = not finish and (end - block >= BLOCK_BYTES or i == len(ends) - 2)
        if not (finish or flush_block):
            continue
        parts.append(cobj.compress(view[block:end]))
        block = end
        if flush_block:
            parts.append(cobj.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK))
            continue
        parts.append(cobj.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH))
        frame = b"".join(parts)
        if dctx.decompressobj().decompress(frame) != view[start:end]:
            raise NotClean("recompressed frame differs")
        yield frame + repair.repair_frame(frame)
        parts = []
        cobj = cctx.compressobj()
        start = end


def replace_atomically(path: Path, parts: Iterable[bytes], verify: Callable[[Path], None] | None = None) -> None:
    """Write parts to a file beside `path` (not named *.cassette, so readers never see it), fsync, `verify` it (which
    raises if it is wrong), rename it over `path`."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            for part in parts:
                out = memoryview(part)
                while out:
                    out = out[os.write(fd, out) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        if verify is not None:
            verify(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):
        dirfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dirfd)
        finally:
            os.close(dirfd)
