"""Part records (a large body written while its exchange ran): readers put the body back byte for byte, with its
times, and never return an exchange whose parts do not all fit."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.core.cassette import CassetteReader, CassetteWriter
from bench.core.cassette.records import Exchange, Part, Request, Response
from bench.core.cassette.seek import SeekIndex

reads = st.lists(st.binary(min_size=0, max_size=40), min_size=1, max_size=30)


def write(path: Path, bodies: list[tuple[list[bytes], list[int]]], tamper: int | None = None) -> list[Exchange]:
    """Each body as parts (cut at the given read counts) and an exchange with the rest; short exchanges between.
    `tamper`: the exchange at that index names its parts in the wrong order (or the wrong exchange's)."""
    writer = CassetteWriter(path, compact_on_close=False)
    wanted = []
    for i, (chunks, cuts) in enumerate(bodies):
        times = [i + k for k in range(len(chunks))]
        seqs = []
        start = 0
        for n, cut in enumerate(sorted(c % (len(chunks) + 1) for c in cuts)):
            part = Part(started=1000 + i, n=n, chunks=chunks[start:cut], chunk_us=times[start:cut])
            seqs.append(asyncio.run(writer.put_packed([writer.pack_part(part)])))
            start = cut
            writer.put(Exchange(id=f"s{i}-{n}", request=Request(body=b"between")))
        if tamper == i and len(seqs) >= 2:
            seqs.reverse()
        elif tamper == i and seqs:
            seqs = [seqs[0] + 1]  # the short exchange after it, not a part
        record = Exchange(id=f"x{i}", started=1000 + i)
        record.response = Response(
            chunks=chunks[start:], chunk_us=times[start:], raw_bytes=sum(map(len, chunks)), parts=seqs
        )
        writer.put(record)
        whole = Exchange(id=f"x{i}", started=1000 + i)
        whole.response = Response(chunks=list(chunks), chunk_us=times, raw_bytes=sum(map(len, chunks)))
        wanted.append(whole)
    writer.close()
    return wanted


@settings(max_examples=60)
@given(bodies=st.lists(st.tuples(reads, st.lists(st.integers(0, 40), max_size=4)), min_size=1, max_size=4))
def test_every_reader_puts_the_parts_back_byte_for_byte(bodies: list[tuple[list[bytes], list[int]]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.cassette"
        wanted = write(path, bodies)
        reader = CassetteReader(path)
        got = {r.id: r for r in reader if r.id.startswith("x")}
        assert reader.problem is None
        for want in wanted:
            assert got[want.id].response == want.response
        assert SeekIndex(path).read([w.id for w in wanted]) == got


@settings(max_examples=40)
@given(
    bodies=st.lists(st.tuples(reads, st.lists(st.integers(0, 40), min_size=1, max_size=3)), min_size=1, max_size=3),
    which=st.integers(0, 2),
)
def test_an_exchange_whose_parts_do_not_fit_is_dropped_and_counted_never_returned_changed(
    bodies: list[tuple[list[bytes], list[int]]], which: int
) -> None:
    which %= len(bodies)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.cassette"
        wanted = write(path, bodies, tamper=which)
        reader = CassetteReader(path)
        got = {r.id: r for r in reader if r.id.startswith("x")}
        assert f"x{which}" not in got
        assert reader.problem is not None and "1 exchange(s) dropped" in reader.problem
        for want in wanted:
            if want.id in got:
                assert got[want.id].response == want.response


def test_parts_whose_exchange_never_ended_are_reported_as_in_flight(tmp_path: Path) -> None:
    path = tmp_path / "p.cassette"
    writer = CassetteWriter(path, compact_on_close=False)
    writer.put(Exchange(id="x1"))
    for n in range(3):
        part = Part(started=7, n=n, chunks=[b"abc", b"de"], chunk_us=[1, 2])
        asyncio.run(writer.put_packed([writer.pack_part(part)]))
    writer.close()
    reader = CassetteReader(path)
    assert [r.id for r in reader] == ["x1"]
    assert reader.problem == (
        f"{path}: read 1 exchange(s); 3 part record(s) (15 body bytes) of 1 exchange(s) that never ended "
        "(in flight when the recording stopped) skipped"
    )


def test_closing_keeps_frames_that_do_not_compress_as_written_and_recompresses_the_others(tmp_path: Path) -> None:
    import os

    from bench.core.cassette.compact import compact
    from bench.core.cassette.format import SEGMENT_BYTES

    path = tmp_path / "c.cassette"
    writer = CassetteWriter(path, compact_on_close=False)
    noise = Exchange(id="x1")
    noise.response = Response(chunks=[os.urandom(SEGMENT_BYTES)], chunk_us=[1], raw_bytes=SEGMENT_BYTES)
    # In the file before anything else is queued: a frame of its own (it fills one), of bytes no level shrinks.
    asyncio.run(writer.put_durable(noise))
    for i in range(200):
        text = Exchange(id=f"t{i}", request=Request(body=b'{"messages":[{"role":"user","content":"hello"}]}' * 4))
        writer.put(text)
    stats = writer.close()
    before = path.read_bytes()
    want = [(r.id, r.response, r.request) for r in CassetteReader(path)]
    assert compact(path, stats.raw_bytes)
    after = path.read_bytes()
    assert [(r.id, r.response, r.request) for r in CassetteReader(path)] == want
    # The random frame is in the new file byte for byte; the text frame after it was recompressed.
    frame = before[before.index(b"\x28\xb5\x2f\xfd", 4) :]
    noise_frame = frame[: frame.index(b"\x28\xb5\x2f\xfd", 4)]
    assert len(noise_frame) > SEGMENT_BYTES // 2 and noise_frame in after
    assert after.index(noise_frame) == before.index(noise_frame)
    assert (
        after[after.index(noise_frame) + len(noise_frame) :] != before[before.index(noise_frame) + len(noise_frame) :]
    )
