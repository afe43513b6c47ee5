"""Repair frames: after each zstd frame of a cassette, what restores it when one stretch of its bytes is damaged.

A flipped byte in a zstd frame breaks the decoding of everything after it in that frame (later blocks copy from the
damaged history), and frames are large because the ratio needs them (benchmarks/frame_size.py: frames of a few
records cost the shipped recording 28x -> 17-20x, with a trained dictionary 21-24x). So the frame's compressed bytes
are cut in stripes, and a repair frame after it holds the XOR of them all (the parity) and a hash of the whole frame.
When the frame's hash does not hold, the parity XOR the stripes as they are is the damage itself; applied to each
stripe in turn, the one that gives the frame its hash back is the damaged one. One flipped byte (or any damage within
one stripe) then loses nothing; damage across two stripes is read as before (the records up to it, then the next
frame).

A repair frame is a zstd skippable frame (magic 0x184D2A5B, then its size): zstd tools pass over it. Its payload:
`BRP1`, the repaired frame's length (u32), the stripe length (u32), an XXH3-64 of the whole frame (so a reader checks
an intact frame with one hash), the parity (one stripe) and an XXH3-64 of all that (low 32 bits), so a damaged repair
frame is never used. A stripe is 1/512 of its frame (at least 64 bytes): the repair frame costs ~0.2-0.4% of the
file, and a repair tries at most ~512 stripes (a hash of the frame each: milliseconds for a 100 KB frame).
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass

import xxhash

MAGIC = struct.pack("<I", 0x184D2A5B)
TAG = b"BRP1"
_HEAD = struct.Struct("<4sIIQ")  # tag, frame length, stripe length, XXH3-64 of the whole frame
_SIZE = struct.Struct("<I")
Buffer = mmap.mmap | bytes
MIN_STRIPE = 64
STRIPES = 512


def stripe_for(length: int) -> int:
    """The stripe length of a frame of `length` bytes: about 1/STRIPES of it, at least MIN_STRIPE."""
    return max(MIN_STRIPE, -(-length // STRIPES))


def _parity(frame: bytes | memoryview, stripe: int) -> int:
    """The XOR of the frame's stripes (the last one, if short, with zeros after it)."""
    parity = 0
    for at in range(0, len(frame), stripe):
        parity ^= int.from_bytes(frame[at : at + stripe], "little")
    return parity


def repair_frame(frame: bytes | memoryview) -> bytes:
    """The repair frame of a whole zstd frame's bytes."""
    stripe = stripe_for(len(frame))
    body = _HEAD.pack(TAG, len(frame), stripe, xxhash.xxh3_64_intdigest(frame))
    body += _parity(frame, stripe).to_bytes(stripe, "little")
    body += _SIZE.pack(xxhash.xxh3_64_intdigest(body) & 0xFFFFFFFF)
    return MAGIC + _SIZE.pack(len(body)) + body


@dataclass(frozen=True)
class Repair:
    at: int  # where the repair frame starts (the repaired frame ends there)
    end: int  # just past it
    length: int  # the repaired frame's length
    stripe: int
    whole: int  # XXH3-64 of the whole frame: one hash says whether there is anything to repair
    parity: bytes


def read_at(buf: Buffer, at: int) -> Repair | None:
    """The repair frame at `at`, if one is there whole and its own checksum holds."""
    head = buf[at : at + 8]
    if len(head) < 8 or head[:4] != MAGIC:
        return None
    (size,) = _SIZE.unpack_from(head, 4)
    body = bytes(buf[at + 8 : at + 8 + size])
    if len(body) != size or size < _HEAD.size + _SIZE.size:
        return None
    (want,) = _SIZE.unpack_from(body, size - _SIZE.size)
    if xxhash.xxh3_64_intdigest(body[: -_SIZE.size]) & 0xFFFFFFFF != want:
        return None
    tag, length, stripe, whole = _HEAD.unpack_from(body)
    if tag != TAG or not stripe or _HEAD.size + stripe + _SIZE.size != size:
        return None
    return Repair(at, at + 8 + size, length, stripe, whole, body[_HEAD.size : _HEAD.size + stripe])


def skip(buf: Buffer, at: int) -> int:
    """Where the repair frame at `at` ends, or `at` if there is none, or a damaged one (its size cannot be trusted:
    what follows is then read as junk up to the next zstd frame)."""
    found = read_at(buf, at)
    return at if found is None else found.end


def find(buf: Buffer, start: int, limit: int) -> Repair | None:
    """The repair frame of the zstd frame starting at `start`: the first one at most `limit` bytes on whose
    recorded length ends where it begins."""
    at = start
    stop = min(len(buf), start + limit)
    while True:
        at = buf.find(MAGIC, at + 1, stop)
        if at < 0:
            return None
        found = read_at(buf, at)
        if found is not None and at - found.length == start:
            return found


def intact(buf: Buffer, start: int, rep: Repair) -> bool:
    """Whether the frame at `start` is as written (one hash over it, no copy)."""
    with memoryview(buf) as view:
        return xxhash.xxh3_64_intdigest(view[start : rep.at]) == rep.whole


def repaired(frame: bytes, rep: Repair) -> bytes | None:
    """The frame with its one damaged stripe restored, or None (intact, or damaged in more than one stripe)."""
    size = rep.stripe
    if xxhash.xxh3_64_intdigest(frame) == rep.whole:
        return None
    damage = int.from_bytes(rep.parity, "little") ^ _parity(frame, size)
    if not damage:
        return None
    buf = bytearray(frame)
    for at in range(0, len(frame), size):
        piece = frame[at : at + size]
        restored = (int.from_bytes(piece, "little") ^ damage).to_bytes(size, "little")
        if restored[len(piece) :].strip(b"\0"):
            continue  # the damage reaches past this (short, last) stripe's end: not here
        buf[at : at + len(piece)] = restored[: len(piece)]
        if xxhash.xxh3_64_intdigest(buf) == rep.whole:
            return bytes(buf)
        buf[at : at + len(piece)] = piece
    return None
