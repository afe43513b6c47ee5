"""Promises of docs/cassette-format.md's prose (its field tables have their own test): the bytes on disk read with a
reader written here from the document alone, the file created exclusively, the close's temporary file never read as a
cassette, and a record of a kind this bench does not know skipped and counted."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import msgpack
import pytest
import xxhash
import zstandard

from bench.core.cassette import CassetteReader, CassetteWriter, find_cassettes
from bench.core.errors import BenchError
from tests.support.records import exchange

MAGIC = b"\x28\xb5\x2f\xfd"
REPAIR_MAGIC = b"\x5b\x2a\x4d\x18"  # a zstd skippable frame
TIMES = {
    "x1": [0, 5, 300, 70_000, 16_777_216],  # uint32 values: column kind 1
    "x2": [0, 1 << 33],  # a value that does not fit a uint32: column kind 2
}


def frames(data: bytes) -> list[tuple[bytes, bytes]]:
    """Each zstd frame of the file: its compressed bytes and what they decompress to; the repair frame after each
    is checked as the document describes it."""
    out = []
    while data:
        assert data.startswith(MAGIC)
        dctx = zstandard.ZstdDecompressor().decompressobj()
        plain = dctx.decompress(data)
        used = len(data) - len(dctx.unused_data)
        out.append((data[:used], plain))
        data = check_repair(data[:used], dctx.unused_data)
    return out


def check_repair(frame: bytes, data: bytes) -> bytes:
    """The repair frame at the start of `data` is the one of `frame`; returns what follows it."""
    assert data[:4] == REPAIR_MAGIC
    (size,) = struct.unpack_from("<I", data, 4)
    body = data[8 : 8 + size]
    tag, length, stripe, whole = struct.unpack_from("<4sIIQ", body)
    assert (tag, length, whole) == (b"BRP1", len(frame), xxhash.xxh3_64_intdigest(frame))
    assert stripe == max(64, -(-len(frame) // 512)) and size == 20 + stripe + 4
    parity = bytearray(stripe)  # the XOR of the frame's stripes, byte by byte
    for i, byte in enumerate(frame):
        parity[i % stripe] ^= byte
    assert body[20 : 20 + stripe] == parity
    assert struct.unpack_from("<I", body, 20 + stripe)[0] == xxhash.xxh3_64_intdigest(body[:-4]) & 0xFFFFFFFF
    return data[8 + size :]


def unshuffle(column: bytes) -> list[int]:
    n = len(column) // 4
    return [int.from_bytes(bytes(column[i * n + j] for i in range(4)), "little") for j in range(n)]


def records(plain: bytes) -> list[tuple[int, int, Any, Any]]:
    """(seq, column kind, column values, map) of each framed record in one frame's data, checking each `check`."""
    out = []
    pos = 0
    while pos < len(plain):
        length, seq, check = struct.unpack_from("<III", plain, pos)
        payload = plain[pos + 12 : pos + 12 + length]
        assert len(payload) == length  # a record never spans frames
        assert check == xxhash.xxh3_64_intdigest(payload, seed=(length << 32) | seq) & 0xFFFFFFFF
        kind, column_length = struct.unpack_from("<BI", payload, 0)
        column = payload[5 : 5 + column_length]
        assert kind in (0, 1, 2)
        values = None if kind == 0 else unshuffle(column) if kind == 1 else msgpack.unpackb(column)
        out.append((seq, kind, values, msgpack.unpackb(payload[5 + column_length :], raw=False)))
        pos += 12 + length
    return out


@pytest.mark.parametrize("closed", [True, False], ids=["closed and recompressed", "as written live"])
def test_the_bytes_on_disk_follow_the_documented_layout(tmp_path: Path, closed: bool) -> None:
    path = tmp_path / "a.cassette"
    writer = CassetteWriter(path, compact_on_close=closed)
    for ident, times in TIMES.items():
        chunks = [f"data: {i}\n\n".encode() for i in range(len(times))]
        writer.put(exchange(id=ident, response={"status": 200, "chunks": chunks, "chunk_us": times}))
    writer.put(exchange(id="x3", response={"status": 502}))  # no times: an empty column
    writer.close()
    (header_bytes, header_plain), *rest = frames(path.read_bytes())
    # The header frame: the header alone, a bare msgpack map, in a frame with zstd's content checksum.
    assert zstandard.get_frame_parameters(header_bytes).has_checksum
    header = msgpack.unpackb(header_plain, raw=False)
    assert (header["kind"], header["version"]) == ("header", 2)
    got = [r for _, plain in rest for r in records(plain)]
    assert [seq for seq, *_ in got] == [1, 2, 3, 4]  # the header is 0; no gaps
    assert [(kind, m["kind"]) for _, kind, _, m in got] == [
        (1, "exchange"),
        (2, "exchange"),
        (1, "exchange"),
        (0, "end"),
    ]
    assert [values for _, _, values, _ in got] == [*TIMES.values(), [], None]
    assert all("chunk_us" not in m.get("response", {}) for *_, m in got)  # the times are the column, not the map
    # The reader puts the column back.
    assert {e.id: e.response.chunk_us for e in CassetteReader(path)} == {**TIMES, "x3": []}


def test_a_cassette_is_created_exclusively_never_over_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "a.cassette"
    path.write_bytes(b"someone else's file")
    with pytest.raises(BenchError, match=r"^cannot create cassette .*a\.cassette: File exists"):
        CassetteWriter(path)
    assert path.read_bytes() == b"someone else's file"


def test_the_rewrite_beside_a_cassette_is_never_read_as_one(tmp_path: Path) -> None:
    with CassetteWriter(tmp_path / "a.cassette") as writer:
        writer.put(exchange(id="x1", response={"status": 200}))
    (tmp_path / ".a.cassette.tmp").write_bytes((tmp_path / "a.cassette").read_bytes())
    assert find_cassettes([tmp_path]) == [tmp_path / "a.cassette"]


def test_a_record_of_a_kind_this_bench_does_not_know_is_skipped_and_said(tmp_path: Path) -> None:
    source = tmp_path / "source.cassette"
    with CassetteWriter(source, compact_on_close=False) as writer:
        writer.put(exchange(id="x1", response={"status": 200}))
    (header_frame, _), *rest = frames(source.read_bytes())
    [(_, _, _, first), *_] = [r for _, plain in rest for r in records(plain)]

    def framed(seq: int, record: dict[str, Any]) -> bytes:
        payload = struct.pack("<BI", 0, 0) + msgpack.packb(record)
        check = xxhash.xxh3_64_intdigest(payload, seed=(len(payload) << 32) | seq) & 0xFFFFFFFF
        return struct.pack("<III", len(payload), seq, check) + payload

    body = framed(1, first) + framed(2, {"kind": "from-the-future", "x": 1})
    path = tmp_path / "newer.cassette"
    path.write_bytes(header_frame + zstandard.ZstdCompressor().compress(body))
    reader = CassetteReader(path)
    assert [e.id for e in reader] == ["x1"]
    assert reader.lost == 0 and reader.problem is not None and "\n" not in reader.problem
    assert "1 record(s) of a kind this bench does not know (from-the-future)" in reader.problem
