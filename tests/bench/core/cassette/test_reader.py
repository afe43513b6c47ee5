from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import msgpack
import pytest

from bench.core.cassette import CassetteReader, CassetteWriter, read_cassette
from bench.core.cassette.format import FORMAT_VERSION
from tests.bench.core.cassette.v1 import FIXTURE, v1_header, write_v1
from tests.support.records import exchange

MIB = 1 << 20


def padded(i: int, size: int) -> dict[str, Any]:
    """An exchange record whose msgpack form is exactly `size` bytes."""
    record: dict[str, Any] = {"kind": "exchange", "id": f"x{i}", "response": {"chunks": [b""]}}
    pad = size - len(msgpack.packb(record, use_bin_type=True))
    for _ in range(3):  # the bin header grows with the body: settle it
        record["response"]["chunks"] = [b"a" * pad]
        pad += size - len(msgpack.packb(record, use_bin_type=True))
    assert len(msgpack.packb(record, use_bin_type=True)) == size
    return record


@pytest.mark.parametrize("past", [1, 37, 100, 150])
def test_v1_live_file_ending_just_past_a_mib_keeps_its_last_exchange(tmp_path: Path, past: int) -> None:
    # A recording still being written (or killed): no end record, the zstd frame not finished, and its decompressed
    # size ends `past` bytes after 1 MiB. stream_reader.read(1 MiB) used to stop short of the last block.
    header = v1_header(id="r1")
    rest = MIB + past - len(msgpack.packb(header, use_bin_type=True))
    sizes = [rest // 3, rest // 3, rest - 2 * (rest // 3)]
    records = [padded(i, n) for i, n in enumerate(sizes)]
    path = tmp_path / "live.cassette"
    assert write_v1(path, header, records, end=None) == MIB + past
    reader = CassetteReader(path)
    got = list(reader)
    assert [r.id for r in got] == ["x0", "x1", "x2"]
    assert got[2].response.chunks == records[2]["response"]["chunks"]
    assert reader.truncated and reader.end is None and reader.lost == 0


@pytest.mark.parametrize("past", [1, 100])
def test_v2_live_file_ending_just_past_a_mib_keeps_its_last_exchange(tmp_path: Path, past: int) -> None:
    path = tmp_path / "live.cassette"
    w = CassetteWriter(path)
    per = (MIB + past - w.stats.raw_bytes) // 3
    for i in range(3):
        w.put(exchange(padded(i, per - 12)))
    while w.stats.records < 4:  # written; the writer is then abandoned as kill -9 would leave it
        time.sleep(0.001)
    reader = CassetteReader(path)
    assert [r.id for r in reader] == ["x0", "x1", "x2"]
    assert reader.truncated and reader.end is None and reader.lost == 0
    w.close()


def test_the_v1_fixture_reads_migrated(tmp_path: Path) -> None:
    reader = CassetteReader(FIXTURE)
    records = list(reader)
    assert reader.version == 1 and reader.problem is None and reader.end is not None
    assert len(records) == reader.end.exchanges == 6
    assert all(isinstance(t, int) for r in records for t in r.response.chunk_us)


def test_writer_stores_times_as_a_column_and_reads_them_back(tmp_path: Path) -> None:
    path = tmp_path / "t.cassette"
    times = [528558, 382, 11516, 0, 2**32 - 1]
    odd = [5, 2**32 + 7]  # a value that does not fit the column (a gap over 71 minutes) stays a list
    with CassetteWriter(path) as w:
        w.put(exchange(id="x0", response={"chunks": [b"a"] * 5, "chunk_us": times}))
        w.put(exchange(id="x1", response={"chunks": [b"a"] * 2, "chunk_us": odd}))
    header, records = read_cassette(path)
    assert header.version == FORMAT_VERSION == 2
    assert [r.response.chunk_us for r in records] == [times, odd]


def test_a_damaged_v1_file_gives_the_exchanges_before_the_damage(tmp_path: Path) -> None:
    # One zstd frame, damaged near its end: the exchanges of the blocks before it are read (this file used to be
    # "empty or cut before its header": the first 1 MiB read raised, and took every record with it).
    data = bytearray(FIXTURE.read_bytes())
    at = len(data) * 4 // 5
    data[at : at + 64] = bytes(64)
    path = tmp_path / "d.cassette"
    path.write_bytes(bytes(data))
    reader = CassetteReader(path)
    got = list(reader)
    clean = list(CassetteReader(FIXTURE))
    assert 1 <= len(got) < len(clean) and got == clean[: len(got)]
    assert reader.problem is not None and reader.problem.startswith(f"{path}: read {len(got)} exchange(s); ")
    assert "empty" not in reader.problem and "damaged" in reader.problem


def test_a_header_of_other_types_is_damage_and_the_exchanges_are_still_read(tmp_path: Path) -> None:
    path = tmp_path / "h.cassette"
    header = {**v1_header(id="r1"), "settings": {"mode": 5}}  # a mode that is not a string
    records = [{"kind": "exchange", "id": f"x{i}"} for i in range(3)]
    write_v1(path, header, records, {"kind": "end", "closed": "t", "exchanges": 3, "queue_full_waits": 0})
    reader = CassetteReader(path)
    assert [r.id for r in reader] == ["x0", "x1", "x2"]
    assert reader.damaged and reader.header.settings.mode is None and reader.header.version == 1
    assert reader.problem is not None and "header malformed" in reader.problem and "settings.mode" in reader.problem
    assert reader.end is not None and reader.end.exchanges == 3


def test_an_end_record_of_other_types_is_a_malformed_record(tmp_path: Path) -> None:
    path = tmp_path / "e.cassette"
    write_v1(path, v1_header(id="r1"), [{"kind": "exchange", "id": "x0"}], {"kind": "end", "exchanges": "three"})
    reader = CassetteReader(path)
    assert [r.id for r in reader] == ["x0"]
    assert reader.end is None and reader.damaged
    assert reader.problem is not None and "1 malformed record(s) skipped" in reader.problem


@pytest.mark.parametrize("version", [1, 2])
def test_reading_a_highly_repetitive_cassette_holds_little_memory(tmp_path: Path, version: int) -> None:
    # 40 MiB of records that compress thousands of times: the reader used to decode the whole file into a list before
    # yielding its first record, and one call could decode a whole frame (templated traffic peaked at GiBs in
    # `bench view`); now the file is decoded as it is read, a piece that adapts to the ratio at a time.
    import tracemalloc

    path = tmp_path / "repetitive.cassette"
    if version == 1:
        write_v1(path, v1_header(id="r1"), [padded(i, MIB) for i in range(40)], end=None)
    else:
        with CassetteWriter(path) as w:
            for i in range(40):
                w.put(exchange(padded(i, MIB)))
    assert path.stat().st_size < MIB
    tracemalloc.start()
    try:
        seen = sum(1 for _ in CassetteReader(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert seen == 40
    assert peak < 20 * MIB, f"peak {peak / MIB:.0f} MiB"
