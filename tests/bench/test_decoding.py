"""bench.decoding: each recorded read decoded to its own piece, whatever the coding and however the bytes were split."""

from __future__ import annotations

import gzip
import zlib

import brotli
from hypothesis import given
from hypothesis import strategies as st

from bench.decoding import content_codings, decode_reads, encode_reads

BODY = b'data: {"choices":[{"delta":{"content":"hello"}}]}\n\n' * 20 + b"data: [DONE]\n\n"


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def wire(coding: str, data: bytes) -> bytes:
    if coding == "gzip":
        return gzip.compress(data)
    if coding == "deflate":
        return zlib.compress(data)
    if coding == "raw-deflate":
        c = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
        return c.compress(data) + c.flush()
    return bytes(brotli.compress(data))


@given(st.sampled_from(["gzip", "deflate", "raw-deflate", "br"]), st.lists(st.integers(0, 2000), max_size=8))
def test_any_split_of_any_coding_decodes_to_the_body_one_piece_per_read(coding: str, cuts: list[int]) -> None:
    reads = split(wire(coding, BODY), cuts)
    decoded = decode_reads(reads, ["deflate" if coding == "raw-deflate" else coding])
    assert decoded.error is None
    assert len(decoded.pieces) == len(reads)
    assert decoded.body == BODY


def test_each_piece_is_what_its_read_completed() -> None:
    c = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    events = [b"data: 1\n\n", b"data: 2\n\n", b"data: 3\n\n"]
    reads = [c.compress(e) + c.flush(zlib.Z_SYNC_FLUSH) for e in events]
    reads[-1] += c.flush()
    assert decode_reads(reads, ["gzip"]).pieces == events


def test_chained_codings_are_undone_last_first() -> None:
    data = bytes(brotli.compress(gzip.compress(BODY)))
    assert content_codings([["Content-Encoding", "gzip, br"]]) == ["gzip", "br"]
    assert decode_reads([data[:10], data[10:]], ["gzip", "br"]).body == BODY


def test_a_corrupt_or_unknown_body_yields_what_decoded_and_the_reason() -> None:
    good = bytes(brotli.compress(BODY))
    decoded = decode_reads([good[:10], b"\xff" * 40, good[50:]], ["br"])
    assert decoded.error is not None and "cannot decode the br body" in decoded.error
    assert len(decoded.pieces) == 3 and decoded.pieces[2] == b""
    cut = decode_reads([gzip.compress(BODY)[:60]], ["gzip"])
    assert cut.error is not None and "cut short" in cut.error and BODY.startswith(cut.body)
    unknown = decode_reads([b"abc"], ["zstd"])
    assert unknown.error == "unknown Content-Encoding 'zstd'" and unknown.pieces == [b""]


def test_a_plain_body_is_its_reads_and_identity_is_plain() -> None:
    reads = [b"a", b"b"]
    assert decode_reads(reads, []).pieces == reads
    assert content_codings([["content-encoding", "identity"], ["Content-Type", "x"]]) == []


def test_encode_reads_then_decode_gives_back_each_piece() -> None:
    pieces = [b"one ", b"", b"three"]
    for coding in ("gzip", "deflate", "br"):
        assert decode_reads(encode_reads(pieces, [coding]), [coding]).pieces == pieces


def test_a_body_that_decodes_past_the_limit_stops_there_and_says_so() -> None:
    bomb = gzip.compress(b"\0" * 5_000_000)
    decoded = decode_reads([bomb[:100], bomb[100:]], ["gzip"], limit=1_000_000)
    assert decoded.too_large and decoded.error is not None and "more than 1000000 bytes" in decoded.error
    assert sum(map(len, decoded.pieces)) <= 1_000_000
    br = bytes(brotli.compress(b"\0" * 5_000_000))
    assert decode_reads([br], ["br"], limit=1_000_000).too_large
    assert not decode_reads([bomb], ["gzip"], limit=5_000_000).too_large
