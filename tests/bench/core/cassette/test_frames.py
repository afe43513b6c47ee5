"""frames.walk decodes a frame whole when its blocks' headers say where it ends, else piece by piece: both must give
the bytes and the frame ends that zstd itself gives (the oracle below is zstandard's decompressobj, fed as it likes),
and damage met after the first pieces were given must give every byte before it exactly once."""

from __future__ import annotations

import random

import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.core.cassette import frames

WORDS = [b"alpha", b"beta", b"gamma", b"delta", b"stream", b"token", b"chunk", b"\n", b"data: ", b"{}"]


def text(size: int, seed: int) -> bytes:
    """Bytes that compress like traffic (words), with stretches of one byte (RLE blocks) and of noise (raw blocks)."""
    rng = random.Random(seed)
    out = bytearray()
    while len(out) < size:
        kind = rng.random()
        if kind < 0.1:
            out += bytes([rng.randrange(256)]) * rng.randrange(1, 300_000)
        elif kind < 0.2:
            out += rng.randbytes(rng.randrange(1, 200_000))
        else:
            out += b" ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 5000)))
    return bytes(out[:size])


def zstd_end(data: bytes) -> int | None:
    """Where zstd ends the frame at the start of `data` (None: it does not end there)."""
    dobj = zstandard.ZstdDecompressor().decompressobj()
    try:
        dobj.decompress(data)
    except zstandard.ZstdError:
        return None
    return len(data) - len(dobj.unused_data) if dobj.eof else None


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 400_000),
    st.integers(0, 1 << 30),
    st.integers(-5, 9),
    st.booleans(),
    st.booleans(),
    st.binary(max_size=40),
)
def test_a_frame_ends_where_zstd_ends_it(
    size: int, seed: int, level: int, checksum: bool, sized: bool, after: bytes
) -> None:
    cctx = zstandard.ZstdCompressor(level=level, write_checksum=checksum, write_content_size=sized)
    frame = cctx.compress(text(size, seed))
    assert frames._frame_end(frame + after, 0) == zstd_end(frame + after) == len(frame)
    # Cut anywhere, it does not end (and zstd agrees).
    for cut in {1, 4, 5, 6, len(frame) // 2, len(frame) - 4, len(frame) - 1}:
        if 0 < cut < len(frame):
            assert frames._frame_end(frame[:cut], 0) is None and zstd_end(frame[:cut]) is None


def test_frames_decoded_whole_give_what_zstd_gives_and_end_where_it_ends() -> None:
    cctx = zstandard.ZstdCompressor(level=3)
    contents = [text(3 * frames.WHOLE_OUT + 12345, 1), b"", text(1000, 2), text(frames.WHOLE_OUT, 3)]
    parts = [cctx.compress(c) for c in contents]
    data = b"".join(parts)
    got: dict[int, bytearray] = {}
    ends = []
    for event in frames.walk(data):
        if isinstance(event, frames.Data):
            got.setdefault(event.frame, bytearray()).extend(event.data)
        else:
            assert isinstance(event, frames.FrameEnd)
            ends.append(event.end)
    assert [bytes(got.get(i, b"")) for i in range(len(contents))] == contents
    assert ends == [sum(map(len, parts[: i + 1])) for i in range(len(parts))]


def before_error(frame: bytes, at: int) -> bytes | None:
    """What zstd gives of `frame` before the error that its byte at `at` makes (None: no error), fed a byte at a
    time from before it, so that no block before the damage is lost with the error."""
    dobj = zstandard.ZstdDecompressor().decompressobj()
    out = bytearray(dobj.decompress(frame[: at - 2048]))
    for i in range(at - 2048, len(frame)):
        try:
            out += dobj.decompress(frame[i : i + 1])
        except zstandard.ZstdError:
            return bytes(out)
    return None


def test_damage_after_the_first_pieces_gives_each_byte_before_it_once() -> None:
    rng = random.Random(7)
    content = b" ".join(rng.choice(WORDS) for _ in range(4 * frames.WHOLE_OUT // 5))
    frame = zstandard.ZstdCompressor(level=3).compress(content)
    for at in range(len(frame) * 3 // 4, len(frame)):  # the first flip there that zstd detects
        damaged = bytearray(frame)
        damaged[at] ^= 0x5A
        before = before_error(bytes(damaged), at)
        if before is not None:
            break
    assert before is not None and len(before) > frames.WHOLE_OUT  # past the first piece of the whole-frame path
    events = list(frames.walk(bytes(damaged)))
    data = b"".join(e.data for e in events if isinstance(e, frames.Data))
    assert data == before == content[: len(before)]
    assert isinstance(events[-1], frames.Skipped) and "damaged zstd data" in events[-1].why
