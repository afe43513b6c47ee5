"""bench.core.decoding: each recorded read decoded to its own piece, whatever the coding and however the bytes were
split."""

from __future__ import annotations

import gzip
import random
import tracemalloc
import zlib

import brotli
from hypothesis import given
from hypothesis import strategies as st

from bench.core.decoding import Decoded, content_codings, decode_reads, decoded_record_reads, encode_reads

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


def raw_deflate(data: bytes) -> bytes:
    return wire("raw-deflate", data)


def test_deflate_is_told_from_raw_deflate_by_the_whole_zlib_header() -> None:
    # Raw deflate whose first two bytes happen to be a multiple of 31 (not a zlib header: the method nibble is not 8).
    body = b"586006" * 3
    raw = raw_deflate(body)
    assert (raw[0] << 8 | raw[1]) % 31 == 0 and raw[0] & 0x0F != 8
    # And one whose first byte has the method nibble 8: a stored block that is not the last (type bits 00, final bit
    # 0, then pad bits, which decoders ignore), followed by an empty last block.
    size = len(body).to_bytes(2, "little") + (len(body) ^ 0xFFFF).to_bytes(2, "little")
    stored = b"\x08" + size + body + b"\x03\x00"
    assert stored[0] & 0x0F == 8 and zlib.decompress(stored, -zlib.MAX_WBITS) == body
    for sent in (raw, stored):
        decoded = decode_reads([sent], ["deflate"])
        assert (decoded.body, decoded.error) == (body, None)


def test_deflate_read_a_byte_at_a_time_and_an_empty_deflate_body() -> None:
    for sent in (zlib.compress(BODY), raw_deflate(BODY)):
        decoded = decode_reads([sent[i : i + 1] for i in range(len(sent))], ["deflate"])
        assert (decoded.body, decoded.error) == (BODY, None)
    for sent in (raw_deflate(b""), zlib.compress(b"")):  # two bytes, and eight: complete streams of nothing
        assert decode_reads([sent], ["deflate"]) == Decoded([b""], ["deflate"])
    # One byte is no stream at all: nothing decoded, and it says the body was cut.
    cut = decode_reads([b"x"], ["deflate"])
    assert cut.pieces == [b""] and cut.error is not None and "cut short" in cut.error


def test_decoded_record_reads_follows_the_recorded_headers() -> None:
    sent = [gzip.compress(BODY[:40]), b""]
    headers = [["Content-Type", "text/event-stream"], ["content-encoding", "gzip"]]
    assert decoded_record_reads(headers, sent) == Decoded([BODY[:40], b""], ["gzip"])
    assert decoded_record_reads([["Content-Type", "text/plain"]], [b"ab", b"c"]) == Decoded([b"ab", b"c"], [])
    # Codings over several headers are applied in order: gzip first, then br.
    twice = [bytes(brotli.compress(gzip.compress(BODY)))]
    both = [["Content-Encoding", "gzip"], ["Content-Encoding", "br"]]
    assert content_codings(both) == ["gzip", "br"]
    assert decoded_record_reads(both, twice) == Decoded([BODY], ["gzip", "br"])


def test_a_fault_keeps_what_came_before_and_every_read_keeps_its_place() -> None:
    # mtime fixed: gzip's header holds the time, and for ~1.6% of seconds its first 20 bytes begin a brotli stream
    # that the decoder takes without complaint, so that the body reads as cut short rather than undecodable.
    sent = gzip.compress(BODY, mtime=0)
    reads = [sent[:20], b"\xff" * 30 + sent[20:], b"more", b"and more"]
    decoded = decode_reads(reads, ["gzip", "br"])  # undone br first: the first read is no brotli stream
    assert decoded.pieces == [b"", b"", b"", b""] and decoded.codings == ["gzip", "br"]
    assert decoded.error is not None and decoded.error.startswith("cannot decode the gzip+br body")
    sent = gzip.compress(BODY)
    decoded = decode_reads([sent[:-8], b"\x00" * 8, b"y"], ["gzip"])  # a bad checksum in the second read
    assert decoded.pieces == [BODY, b"", b""] and decoded.error is not None and "gzip body" in decoded.error
    unknown = decode_reads([b"a", b"b"], ["zstd"])
    assert unknown == Decoded([b"", b""], ["zstd"], "unknown Content-Encoding 'zstd'")


def test_the_limit_counts_the_whole_body_and_holds_exactly() -> None:
    body = b"x" * 1000
    for coding in ("gzip", "deflate", "br"):
        exact = decode_reads([wire(coding, body)], [coding], limit=1000)
        assert (exact.body, exact.error, exact.too_large) == (body, None, False), coding
        # Past the limit: what decoded up to it is kept (the record keeps what was received as far as it could be
        # decoded), and the rest is not decoded.
        over = decode_reads([wire(coding, body)], [coding], limit=999)
        assert over.too_large and over.pieces == [body[:999]] and over.error is not None and "999" in over.error, coding
    # Each read's piece is under the limit, the body is not.
    enc = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    reads = [enc.compress(b"a" * 600) + enc.flush(zlib.Z_SYNC_FLUSH), enc.compress(b"b" * 600) + enc.flush()]
    split_body = decode_reads(reads, ["gzip"], limit=1000)
    assert split_body.too_large and split_body.pieces == [b"a" * 600, b"b" * 400]
    later = decode_reads([*reads, b"more"], ["gzip"], limit=1000)
    assert later.pieces == [b"a" * 600, b"b" * 400, b""]


def test_chained_codings_past_the_limit_keep_only_decoded_body_never_a_still_compressed_stream() -> None:
    # With two codings the first decoder's output is the other coding's compressed stream: when that is what passes
    # the limit, nothing of it is the body, and none of it may be kept as if it were.
    # Random letters: gzip's stream of them (Huffman-coded, ~60% of the body) passes the limit before the body does.
    # Not random bytes: gzip stores those verbatim, and its stream would hold the body's own bytes.
    rng = random.Random(1)
    body = bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(10_000))
    sent = bytes(brotli.compress(gzip.compress(body, mtime=0)))
    decoded = decode_reads([sent[:50], sent[50:]], ["gzip", "br"], limit=1000)
    assert decoded.too_large and decoded.error is not None and "more than 1000 bytes" in decoded.error
    assert body.startswith(decoded.body)


def test_a_compression_bomb_is_not_decoded_into_memory() -> None:
    bomb = gzip.compress(b"\0" * (64 << 20))  # 64 MiB of zeros in about 64 KiB
    for coding, sent in (("gzip", bomb), ("br", bytes(brotli.compress(b"\0" * (64 << 20), quality=1)))):
        tracemalloc.start()
        try:
            decoded = decode_reads([sent], [coding], limit=1 << 20)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert decoded.too_large, coding
        assert peak < 16 << 20, (coding, peak)  # the limit's worth, not the 64 MiB the body expands to


def test_encoding_again_keeps_the_coding_and_a_plain_body() -> None:
    pieces = [BODY[:30], b"", BODY[30:]]
    assert encode_reads(pieces, []) == pieces
    for coding in ("gzip", "x-gzip", "deflate", "br"):
        again = encode_reads(pieces, [coding])
        assert decode_reads(again, [coding]) == Decoded(pieces, [coding]), coding
    assert gzip.decompress(b"".join(encode_reads(pieces, ["x-gzip"]))) == BODY  # x-gzip is gzip
