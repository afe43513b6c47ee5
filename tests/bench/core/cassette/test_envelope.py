"""The unframer reads records in place from each decompressed piece and joins only those cut between pieces: however
the data is cut into pieces, and wherever it is damaged, it must return the same records and count the same loss as
when the frame's data comes in one piece (and, undamaged, exactly the records framed)."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from bench.core.cassette.envelope import Unframer, frame_record


def read(pieces: list[bytes], last_seq: int = 0) -> tuple[list[tuple[int, bytes]], int, int]:
    unframer = Unframer(last_seq=last_seq)
    got: list[tuple[int, bytes]] = []
    for piece in pieces:
        got += [(seq, bytes(p)) for seq, p in unframer.feed(piece)]
    got += [(seq, bytes(p)) for seq, p in unframer.finish()]
    return got, unframer.lost, unframer.bad_bytes


def cut(data: bytes, points: list[int]) -> list[bytes]:
    bounds = sorted({min(p, len(data)) for p in points})
    edges = [0, *bounds, len(data)]
    return [data[a:b] for a, b in pairwise(edges)]


payloads = st.lists(st.binary(min_size=0, max_size=300), min_size=1, max_size=12)
points = st.lists(st.integers(min_value=0, max_value=4000), max_size=20)


@given(payloads, points)
def test_any_cut_gives_every_record(records: list[bytes], at: list[int]) -> None:
    data = b"".join(frame_record(i + 1, p) for i, p in enumerate(records))
    got, lost, bad = read(cut(data, at))
    assert got == [(i + 1, p) for i, p in enumerate(records)]
    assert (lost, bad) == (0, 0)


@given(payloads, points, st.integers(min_value=0), st.integers(min_value=1, max_value=255))
def test_damage_reads_the_same_however_cut(records: list[bytes], at: list[int], where: int, flip: int) -> None:
    data = bytearray(b"".join(frame_record(i + 1, p) for i, p in enumerate(records)))
    data[where % len(data)] ^= flip
    whole = read([bytes(data)])
    assert read(cut(bytes(data), at)) == whole
    # Whatever is returned is a record as framed: damage never returns a record changed.
    assert set(whole[0]) <= {(i + 1, p) for i, p in enumerate(records)}


def test_records_spanning_three_pieces() -> None:
    records = [b"a" * 50, b"b" * 5, b"c" * 200]
    data = b"".join(frame_record(i + 1, p) for i, p in enumerate(records))
    # Cuts inside the first prefix, inside a payload, and a piece smaller than a prefix.
    assert read(cut(data, [5, 9, 30, 64, 70, 73, 100]))[0] == [(1, records[0]), (2, records[1]), (3, records[2])]
