"""Damage that repair frames cannot undo (bench.core.cassette.repair), for tests of how damage is read and said."""

from __future__ import annotations

from bench.core.cassette import repair


def beyond_repair(data: bytearray, at: int, flip: int = 0xFF) -> None:
    """Flip the byte at `at` and break the repair frame that would rebuild its frame (the next one after it): the
    file then reads as it did before repair frames."""
    data[at] ^= flip
    found = data.find(repair.MAGIC, at)
    if found >= 0:
        data[found + 12] ^= 0xFF


def cut_into_last_frame(data: bytes, n: int) -> bytes:
    """The file cut `n` bytes before its last repair frame: inside its last zstd frame (the end record's)."""
    return data[: data.rfind(repair.MAGIC) - n]
