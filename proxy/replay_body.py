"""A recorded body's reads for replay, in order, with their recorded deltas: a large answer's part records are read
from its cassette as they are served, one file frame at a time, so that replaying a 50 MB answer holds about one
part of it (docs/proxy.md, "Large answers"), not the whole body.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

from bench.core.cassette.records import Exchange, Part
from bench.core.errors import CassetteError
from bench.proxy.recordings import Recorded


class BodyUnreadable(Exception):
    """A part of the recorded body could not be read back from its cassette; the message names the file."""


async def recorded_reads(hit: Recorded, record: Exchange) -> AsyncIterator[tuple[bytes, int]]:
    """(read, delta in us) for every read of the recorded body: its parts' first, then the record's own. Reading a
    part (a file read and zstd's work on one frame) runs in a thread: the event loop serves the other replays
    meanwhile. BodyUnreadable if a part is not there any more."""
    response = record.response
    if response.parts:
        if hit.seeker is None:
            raise BodyUnreadable(f"{hit.cassette}: exchange {hit.id}: its body's part records were not indexed")
        parts = hit.seeker.parts(record.id, response.parts)
        while True:
            part = await asyncio.to_thread(_next_part, parts)
            if part is None:
                break
            for chunk, delta in zip(part.chunks, part.chunk_us, strict=False):
                yield chunk, delta
            del part  # let it go before the next one is read
    for chunk, delta in zip(response.chunks, response.chunk_us, strict=False):
        yield chunk, delta


def _next_part(parts: Iterator[Part]) -> Part | None:
    try:
        return next(parts, None)
    except CassetteError as exc:
        raise BodyUnreadable(str(exc)) from None
