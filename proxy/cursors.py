"""Where each match key stands in its recordings (bench.proxy.recordings.ReplayIndex.take): identical requests are
served in recorded order, each recording claimed once.

One process keeps its cursors in a dict (`LocalCursors`). The workers of `bench proxy --workers N` share theirs
(`SharedCursors`): one 8-byte counter per match key in a memory file every worker inherits, each claim a read and an
advance under a POSIX record lock on that key's 8 bytes. The kernel releases a lock whose holder dies, even by
kill -9, so no worker can leave the others waiting; claims of different keys do not contend; a claim is four system
calls (~2-4 us), next to the ~100 us a replayed exchange costs. No coordinator process: nothing more to stop or lose.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterable
from typing import Protocol

SLOT = 8  # bytes per counter


class Cursors(Protocol):
    def claim(self, key: str, count: int, *, wrap: bool) -> int | None:
        """The index of the recording (of `count`) the next request of `key` gets, None when they are used up and not
        wrapping; advances the key's cursor."""

    def position(self, key: str) -> int:
        """How many of `key`'s recordings have been claimed (not counting wraps)."""


def _advance(i: int, count: int, wrap: bool) -> int | None:
    if i < count:
        return i
    return 0 if wrap else None


class LocalCursors:
    """The cursors of one process."""

    def __init__(self) -> None:
        self._next: dict[str, int] = {}

    def claim(self, key: str, count: int, *, wrap: bool) -> int | None:
        i = _advance(self._next.get(key, 0), count, wrap)
        if i is not None:
            self._next[key] = i + 1
        return i

    def position(self, key: str) -> int:
        return self._next.get(key, 0)


class SharedCursors:
    """Cursors shared by processes forked after it was made (they inherit its file): one counter per key of `keys`."""

    def __init__(self, keys: Iterable[str]) -> None:
        self._slots = {key: n * SLOT for n, key in enumerate(sorted(set(keys)))}
        try:
            self._fd = os.memfd_create("bench-replay-cursors", os.MFD_CLOEXEC)
        except (AttributeError, OSError):  # no memfd (not Linux): an unlinked temporary file does the same
            with tempfile.TemporaryFile() as fh:
                self._fd = os.dup(fh.fileno())
        os.ftruncate(self._fd, max(SLOT, len(self._slots) * SLOT))

    def claim(self, key: str, count: int, *, wrap: bool) -> int | None:
        offset = self._slots.get(key)
        if offset is None:
            return None
        fcntl.lockf(self._fd, fcntl.LOCK_EX, SLOT, offset, os.SEEK_SET)
        try:
            i = _advance(int.from_bytes(os.pread(self._fd, SLOT, offset), "little"), count, wrap)
            if i is not None:
                os.pwrite(self._fd, (i + 1).to_bytes(SLOT, "little"), offset)
        finally:
            fcntl.lockf(self._fd, fcntl.LOCK_UN, SLOT, offset, os.SEEK_SET)
        return i

    def position(self, key: str) -> int:
        offset = self._slots.get(key)
        return 0 if offset is None else int.from_bytes(os.pread(self._fd, SLOT, offset), "little")
