"""v2's compact column for per-read arrival times (`response.chunk_us`), stored beside the record, not in it.

The deltas are jittery microsecond counts: as msgpack integers they were ~1% of a recording's raw bytes but ~25% of
its compressed size. Stored as uint32 little-endian with the bytes shuffled (every value's lowest byte, then every
second byte, ...), the near-constant high bytes form long runs that zstd compresses well; the jitter is kept exactly.

A v2 record's payload is `kind (u8), length (u32), column, msgpack record`: the proxy's event loop packs the record
without its times (less work than packing them as integers) and the writer thread builds the column. Kinds:
NONE (the record keeps whatever `response.chunk_us` it has), SHUFFLED (uint32 column), LIST (msgpack list: a value
that does not fit a uint32: a gap over 71 minutes; a reader takes 0 to records.MAX_SPAN_US only).
"""

from __future__ import annotations

import struct
import sys
from array import array
from typing import Any

import msgpack

from bench.core.cassette.records import MAX_SPAN_US

NONE, SHUFFLED, LIST = 0, 1, 2
HEAD = struct.Struct("<BI")
_WIDE = 4
_BIG_ENDIAN = sys.byteorder != "little"


def payload_parts(packed: bytes, times: list[int] | None) -> tuple[bytes, bytes]:
    """The v2 payload of a packed record and the times taken out of it (None: nothing was taken out), in two parts
    that are never joined: a large record is not copied again on its way to the compressor."""
    if times is None:
        return HEAD.pack(NONE, 0), packed
    kind, column = _column(times)
    return HEAD.pack(kind, len(column)) + column, packed


def payload(packed: bytes, times: list[int] | None) -> bytes:
    return b"".join(payload_parts(packed, times))


def _column(times: list[int]) -> tuple[int, bytes]:
    try:
        values = array("I", times)
    except (OverflowError, TypeError):
        return LIST, msgpack.packb(times)
    if _BIG_ENDIAN:  # pragma: no cover
        values.byteswap()
    raw = values.tobytes()
    return SHUFFLED, b"".join(raw[i::_WIDE] for i in range(_WIDE))


def split(data: bytes | memoryview) -> tuple[bytes | memoryview, list[int] | None]:
    """(msgpack record, times or None) from a v2 payload; ValueError if it is not one. A view in, views out: the
    record is not copied on its way to the decoder."""
    kind, end = _head(data)
    if kind == SHUFFLED:  # the writer's column: first
        return data[end:], _unshuffle(data[HEAD.size : end])
    column = data[HEAD.size : end]
    record = data[end:]
    if kind == NONE:
        return record, None
    if kind == LIST:
        times: Any = msgpack.unpackb(column)
        if isinstance(times, list) and all(isinstance(t, int) and 0 <= t <= MAX_SPAN_US for t in times):
            return record, times
        raise ValueError(f"time column holds a value that is not a time from 0 to {MAX_SPAN_US} us")
    raise ValueError(f"unknown or malformed time column (kind {kind})")


def counted(data: bytes | memoryview) -> tuple[bytes | memoryview, int | None]:
    """(msgpack record, how many times its column holds) from a v2 payload, without decoding the times: None for no
    column. ValueError for a payload that is not one, or a column that is not a whole uint32 one (a LIST column is
    decoded and checked by `split`, so it is refused here too)."""
    kind, end = _head(data)
    if kind == NONE:
        return data[end:], None
    n = end - HEAD.size
    if kind != SHUFFLED or n % _WIDE:
        raise ValueError("not a whole uint32 time column")
    return data[end:], n // _WIDE


def _head(data: bytes | memoryview) -> tuple[int, int]:
    """(column kind, where the record starts) of a v2 payload; ValueError if it is not one."""
    if len(data) < HEAD.size:
        raise ValueError("payload shorter than its column header")
    kind, n = HEAD.unpack_from(data)
    end = HEAD.size + n
    if end > len(data):
        raise ValueError("column longer than its payload")
    return kind, end


def record_part(data: bytes | memoryview) -> memoryview:
    """The msgpack record of a v2 payload without decoding its column (for readers that need a field or two)."""
    _, end = _head(data)
    return memoryview(data)[end:]


def _unshuffle(column: bytes | memoryview) -> list[int]:
    size = len(column)
    if size % _WIDE:
        raise ValueError("uint32 time column of a length that is not a multiple of 4")
    n = size // _WIDE
    raw = bytearray(size)
    # Unrolled, and array's tolist (memoryview's converts each item through struct's generic path): ~2 of ~7 us a
    # record of 300 reads.
    raw[0::4] = column[:n]
    raw[1::4] = column[n : 2 * n]
    raw[2::4] = column[2 * n : 3 * n]
    raw[3::4] = column[3 * n :]
    values = array("I", raw)
    if _BIG_ENDIAN:  # pragma: no cover - big-endian machines
        values.byteswap()
    return values.tolist()
