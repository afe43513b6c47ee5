"""CassetteReader's `skip_reads`: an exchange whose reads the caller holds elsewhere (the parse cache) is returned
without them, every other field decoded and checked as a whole read checks it."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from bench.core.cassette import CassetteReader
from bench.core.cassette.records import Exchange, Response
from bench.core.cassette.writer import CassetteWriter
from bench.scorer.synth import exchange_record, sse_chunks
from tests.support import hostile_cassettes as hc


def _stripped(record: Exchange) -> bytes:
    """The record as a plain Exchange in msgpack, its reads and their times left out."""
    fields = {f: getattr(record.response, f) for f in Response.__struct_fields__}
    response = Response(**{**fields, "chunks": [], "chunk_us": []})
    plain = Exchange(
        **{f: getattr(record, f) for f in Exchange.__struct_fields__ if f != "response"}, response=response
    )
    return msgspec.msgpack.encode(plain)


@pytest.fixture
def cassette(tmp_path: Path) -> Path:
    path = tmp_path / "c.cassette"
    with CassetteWriter(path) as writer:
        for i in range(5):
            text = " ".join(f"w{i}x{k}" for k in range(3 + 40 * i))  # 0 to 160 reads: fixarray, array16
            writer.put(exchange_record(sse_chunks(text), id=f"x{i}", tags={"test": "t.one", "epoch": str(i)}))
    return path


def test_skipped_reads_leave_every_other_field_and_the_digest_and_whole_gives_them_back(cassette: Path) -> None:
    full = CassetteReader(cassette)
    wanted = [(r, full.digest()) for r in full]
    asked: list[bytes] = []
    reader = CassetteReader(cassette, skip_reads=lambda d: asked.append(d) or True)
    got = 0
    for (whole, digest), record in zip(wanted, reader, strict=True):
        assert (record.response.chunks, record.response.chunk_us) == ([], [])
        assert len(whole.response.chunks) > 1 and _stripped(record) == _stripped(whole)
        assert reader.digest() == digest == asked[-1]
        back = reader.whole(record)
        assert type(back) is Exchange and msgspec.msgpack.encode(back) == msgspec.msgpack.encode(whole)
        got += 1
    assert got == 5 and (reader.problem, reader.exchanges) == (full.problem, full.exchanges)


def test_reads_not_skipped_when_the_caller_does_not_hold_them(cassette: Path) -> None:
    full = [msgspec.msgpack.encode(r) for r in CassetteReader(cassette)]
    reader = CassetteReader(cassette, skip_reads=lambda d: False)
    records = list(reader)
    assert [msgspec.msgpack.encode(r) for r in records] == full
    assert all(reader.whole(r) is r for r in records[-1:])


@pytest.mark.parametrize("as_list", [False, True])
@pytest.mark.parametrize("times", [[5, 5], [5] * 9])
def test_times_that_do_not_fit_the_reads_are_malformed_when_skipped_too(
    tmp_path: Path, times: list[int], as_list: bool
) -> None:
    reads = len(hc.exchange_map("bad")["response"]["chunks"])
    assert reads not in (len(times), 0)
    good = hc.payload(hc.exchange_map("before"), [5] * reads)
    bad = hc.payload(hc.exchange_map("bad"), times, as_list=as_list)
    path = hc.write(tmp_path / "h.cassette", [good, bad, good])
    plain = CassetteReader(path)
    skipping = CassetteReader(path, skip_reads=lambda d: True)
    assert [r.id for r in skipping] == [r.id for r in plain] == ["before", "before"]
    assert skipping.problem == plain.problem and plain.problem is not None
    assert f"{len(times)} arrival time(s) for {reads} read(s)" in plain.problem


def test_a_read_that_is_no_bytes_is_found_by_whole(tmp_path: Path) -> None:
    doc = hc.exchange_map("bad")
    doc["response"]["chunks"][1] = 7  # a read that is not bytes: a whole read calls the record malformed
    path = hc.write(tmp_path / "h.cassette", [hc.payload(doc, [5] * len(doc["response"]["chunks"]))])
    assert [r.id for r in CassetteReader(path)] == []
    reader = CassetteReader(path, skip_reads=lambda d: True)
    for record in reader:
        # Only a digest held for a payload that once decoded whole skips reads, so this needs a forged digest: the
        # reads are still decoded and checked before anything uses them, and the damage is one line.
        with pytest.raises(Exception, match="its reads do not decode; the file is damaged"):
            reader.whole(record)
