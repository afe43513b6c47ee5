"""A large response body written to the cassette in parts while it streams, so that one exchange holds a bounded
amount of memory however large its answer (docs/cassette-format.md, `part`; docs/proxy.md, "Large answers").

Once the reads an exchange holds pass SPILL_BYTES, they are scrubbed of secrets (`BodyScrubber`: across part
boundaries too), packed as a part record and queued to the cassette writer; the exchange keeps only what was not
safe to write yet (the last HOLD_BYTES at least), the first bytes of the body (identity) and the token watch's state.
Its record, written when it ends, lists the parts' sequence numbers, and readers put the body back together.
A part is queued only once the exchange's previous part is in the file, and meanwhile the exchange's upstream is
not read: the writer sets the pace, and an exchange holds at most its held reads and one part, whatever its size.
"""

from __future__ import annotations

import asyncio

from bench.core.cassette import CassetteWriter
from bench.core.cassette.format import TRUNCATED
from bench.core.cassette.records import Part
from bench.core.cassette.writer import WriterClosed
from bench.core.decoding import MAX_DECODED
from bench.proxy.identity import EDGE_BYTES, edge
from bench.proxy.recorder import FINISH_RE, Exchange, Spill

# A body is written in parts once its held reads pass this. Measured (benchmarks/record_memory.py, 8 answers of
# 50-100 MB at once): at 8 MiB +229 MiB of peak RSS over idle, at 4 MiB +117-124 MiB; the parts are compressed in the
# same zstd stream as the rest, so their size costs no ratio. A body that spills is identified from its first and
# last EDGE_BYTES, as one past MAX_JSON_IDENTITY always is (OpenAI bodies: `model` near the start,
# `system_fingerprint` near the end).
SPILL_BYTES = 4 << 20
# Reads kept back at a spill: the body's end is looked at for its identity and for [DONE] from these.
HOLD_BYTES = EDGE_BYTES
NEVER = 1 << 62
# A compressed body is held whole (below, `body_limit`), up to this: past it the record could not be decoded or searched
# any further anyway (bench.core.decoding.MAX_DECODED; a body's wire bytes are at most a few bytes per 16 KiB more than
# it decodes to), so the rest is forwarded and not recorded, and the record says so (`hold_no_more`).
COMPRESSED_HOLD = MAX_DECODED + (1 << 20)


def body_limit(ex: Exchange, spill_bytes: int | None) -> tuple[int, bool]:
    """(held bytes, compressed): past the bytes this exchange's body is written in parts (NEVER: held whole, as when
    nothing is recorded: `spill_bytes` None), or, if it is compressed, no longer held (COMPRESSED_HOLD): a compressed
    body is searched for secrets decoded, as one stream, which parts written one by one could not be (docs/proxy.md,
    "Large answers")."""
    if spill_bytes is None:
        return NEVER, False
    if any(k.lower() == "content-encoding" for k, _ in ex.response.headers):
        return COMPRESSED_HOLD, True
    return spill_bytes, False


def hold_no_more(ex: Exchange, held: int) -> None:
    """A compressed body reached COMPRESSED_HOLD: its client gets the rest, its record keeps what is held, marked
    as cut, so that a replay breaks it off where the record ends rather than serve it as whole."""
    ex.cut_off(
        TRUNCATED,
        f"the compressed body passed the {COMPRESSED_HOLD / (1 << 20):g} MiB a compressed answer is recorded up to: "
        f"the client got it whole, the record keeps its first {held} bytes (for all of it, have the client send "
        "Accept-Encoding: identity)",
    )


async def spill(ex: Exchange, writer: CassetteWriter) -> int:
    """Write the reads `ex` holds as a part to `writer`'s cassette, but for the last ones; returns the bytes it still
    holds. The state it changes is changed only once the part is queued: a cancelled handler waits for it
    (`spill_safely`)."""
    sp = ex.spill
    if sp is None:
        request = ex.request
        scrubber = writer.redactor.body_scrubber(request.headers, request.query, request.body, ex.response.headers)
        sp = Spill(scrubber, edge(ex.chunks, EDGE_BYTES), ex.times[0], ex.response.streamed)
        ex.parts_begun(sp)
    reads = ex.chunks
    count = len(reads)
    if sp.failed:
        ex.parts_failed()
        return len(ex.chunks[-1]) if ex.chunks else 0
    steps = sp.scrubber.split_steps(reads[:count], HOLD_BYTES)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            out, held = done.value
            break
        await asyncio.sleep(0)
    j = len(out)
    if j == 0:
        return sum(map(len, reads))
    times = ex.times[:j]
    _watch(sp, reads[:j], times)
    deltas: list[int] = []
    prev = sp.prev_us
    t0 = ex.t0
    for t in times:
        us = (t - t0) // 1000
        deltas.append(us - prev)
        prev = us
    part = Part(started=ex.started_us, n=len(sp.seqs), chunks=out, chunk_us=deltas)
    try:
        if sp.seqs:
            # At most one part of an exchange waits in the writer's queue: without this, a fast upstream filled the
            # whole queue (64 MiB) with one answer's parts, and memory grew with the answer's size.
            await writer.written(sp.seqs[-1])
        seq = await writer.put_packed([writer.pack_part(part)])
    except WriterClosed:
        sp.failed = True
        seq = 0
    if not sp.failed:
        sp.seqs.append(seq)
        sp.bytes += sum(map(len, out))
    sp.raw += sum(len(r) for r in reads[:j])
    sp.prev_us = prev
    ex.part_written(count, j, held)
    return sum(map(len, ex.chunks))


async def spill_safely(ex: Exchange, writer: CassetteWriter) -> int:
    """`spill`, finished even if the handler is cancelled meanwhile (its client left, the upstream went silent):
    the exchange's reads are then either all still held or written, never half of each."""
    task = asyncio.get_running_loop().create_task(spill(ex, writer))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await task
        raise


def _watch(sp: Spill, reads: list[bytes], times: list[int]) -> None:
    """What `Exchange.identify`/`settle_stream` would have seen in these reads: fed in order, before they go."""
    if sp.watch is not None and not sp.watch_done:
        for chunk, t in zip(reads, times, strict=False):
            if sp.watch.feed(chunk):
                sp.watch_done = True
                if sp.watch.found:
                    sp.first_token = t
                break
    if sp.watch is not None and not sp.finish_seen:
        carry = sp.finish_carry
        for chunk in reads:
            if FINISH_RE.search(carry + chunk) is not None:
                sp.finish_seen = True
                break
            carry = (carry + chunk)[-96:] if len(chunk) < 96 else chunk[-96:]
        sp.finish_carry = carry
