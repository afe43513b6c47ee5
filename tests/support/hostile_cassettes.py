"""Cassettes made by hand, byte for byte, the way a hostile author would: valid framing and checksums around records
whose values no bench writes (times past the year 9999, negative times, fewer times than reads, nesting 200k deep,
megabyte names), and zstd frames that decompress to gigabytes. docs/cassette-format.md ("Bounds") says what a reader
does with each."""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgpack
import msgspec
import zstandard

from bench.core.cassette import columns, envelope
from bench.core.cassette.format import FORMAT_NAME, FORMAT_VERSION
from bench.scorer.synth import exchange_record, sse_chunks

TAGS = {"run": "r1", "test": "math.ages", "model": "m1", "epoch": "0", "turn": "0", "attempt": "1"}


def header() -> bytes:
    return msgpack.packb({"kind": "header", "format": FORMAT_NAME, "version": FORMAT_VERSION, "run": {"id": "r1"}})


def exchange_map(id: str, content: str = "Answer: 13", **tags: str) -> dict[str, Any]:
    """A well-formed exchange as the map a writer packs (its times left out: they go in the payload's column)."""
    record = exchange_record(sse_chunks(content), id=id, tags={**TAGS, **tags})
    doc: dict[str, Any] = msgpack.unpackb(msgspec.msgpack.encode(record))
    doc["response"].pop("chunk_us", None)
    return doc


def payload(doc: Mapping[str, Any] | bytes, times: Sequence[int] | None, *, as_list: bool = False) -> bytes:
    """A v2 payload: the time column (LIST kind when `as_list`, so any integer can be written) and the packed map."""
    packed = doc if isinstance(doc, bytes) else msgpack.packb(doc)
    if times is None:
        return columns.payload(packed, None)
    if as_list:
        column = msgpack.packb(list(times))
        return columns.HEAD.pack(columns.LIST, len(column)) + column + packed
    return columns.payload(packed, list(times))


def write(path: Path, payloads: Sequence[bytes], *, end: bool = True) -> Path:
    """A v2 cassette: the header frame, then one frame holding the payloads framed with seq 1.. and (when `end`) an
    end record."""
    body = b"".join(envelope.frame_record(seq, p) for seq, p in enumerate(payloads, 1))
    if end:
        packed = msgpack.packb({"kind": "end", "closed": "2026-01-01T00:00:00Z", "exchanges": len(payloads)})
        body += envelope.frame_record(len(payloads) + 1, columns.payload(packed, None))
    cctx = zstandard.ZstdCompressor(write_checksum=True)
    path.write_bytes(cctx.compress(header()) + cctx.compress(body))
    return path


def deep_msgpack(depth: int) -> bytes:
    """A list nested `depth` levels deep, packed (one byte a level)."""
    return b"\x91" * depth + b"\xc0"


def rle_bomb(total: int, byte: int = 0) -> bytes:
    """A zstd frame of RLE blocks that decompresses to `total` copies of `byte`: 4 bytes per 128 KiB, no content size
    in its header (a reader cannot tell its size without decoding it)."""
    block = 1 << 17
    out = bytearray(b"\x28\xb5\x2f\xfd" + bytes([0x00, (17 - 10) << 3]))  # no size, no checksum; window 128 KiB
    blocks = total // block
    for i in range(blocks):
        last = 1 if i == blocks - 1 else 0
        out += struct.pack("<I", (block << 3) | (1 << 1) | last)[:3] + bytes([byte])
    return bytes(out)


def bomb(path: Path, total: int) -> Path:
    """A cassette whose header is sound and whose next frame decompresses to `total` bytes."""
    cctx = zstandard.ZstdCompressor(write_checksum=True)
    path.write_bytes(cctx.compress(header()) + rle_bomb(total))
    return path
