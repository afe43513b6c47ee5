"""Responses API streams' runs (bench.core.event_runs, numbered): which field of an event a run's string fills, proved.

A delta event's read is `event: TYPE` LF `data: {"type":TYPE,"sequence_number":N,...,"delta":"..."...}` LF LF: two
holes, the sequence number and the delta. The run's template is decoded with sentinels in them: "A" and "B" in the
string hole must give events equal but for `delta`, which holds each string; 1 and 2 in the integer hole must give
equal events (the hole is a field the parser does not keep, such as `sequence_number`, so any integer there reads
alike); a paired run's second string (`obfuscation`) must read alike with another string or a number in its place.
Then every read of the run is that event with its string as the delta, and bench.core.parse_responses folds the run
without building an event per read. Covered: text, refusal, reasoning and function-call argument deltas, with no
response object in them; argument deltas only when they name their call (an output index or an item id), so that
every one of them goes to the same call.
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec.structs import replace

from bench.core.event_runs import Run, find_run, ignores_other
from bench.core.response_events import Event, decode_event
from bench.core.run_proofs import MIN_RUN

ARGUMENTS = "response.function_call_arguments.delta"
COVERED = frozenset(
    {
        "response.output_text.delta",
        "response.refusal.delta",
        "response.reasoning_text.delta",
        "response.reasoning_summary_text.delta",
        ARGUMENTS,
    }
)
_DATA, _TAIL = b"data: ", b"\n\n"


def response_run(reads: Sequence[bytes]) -> tuple[Run, Event] | None:
    """The stream's run and its event (with the delta "A"), or None."""
    n = len(reads)
    if n < MIN_RUN:
        return None
    # The read in the middle names the run's event type in its `event:` line; in a stream of several output items it
    # may be an item's boundary, so the reads at a third and two thirds name the others tried.
    heads = dict.fromkeys(map(_head, (reads[n // 2], reads[n // 3], reads[2 * n // 3])))
    run = next((found for found in (find_run(reads, head, _TAIL, numbered=True) for head in heads) if found), None)
    if run is None:
        return None
    head = _head(run.prefix)  # the run's first read may start inside an event when reads hold several
    skip, tail = len(head), len(_TAIL)
    a = decode_event(run.template(b'"A"', skip, tail))
    b = decode_event(run.template(b'"B"', skip, tail))
    a2 = decode_event(run.template(b'"A"', skip, tail, number=b"2"))
    if a is None or b is None or a2 != a or a.delta != "A" or b.delta != "B" or replace(b, delta="A") != a:
        return None
    if run.rest is not None and not ignores_other(run, decode_event, a, skip, tail):
        return None
    if a.type not in COVERED or a.response is not None:
        return None
    if a.type == ARGUMENTS and a.output_index is None and not a.item_id:
        return None  # each such delta starts a call of its own
    return run, a


def _head(read: bytes) -> bytes:
    """A read's SSE framing before its JSON: `event: NAME` LF `data: ` (the name without CR or LF), or `data: `."""
    if read.startswith(b"event: "):
        line = read.find(b"\n")
        if line > 0 and read.startswith(_DATA, line + 1) and b"\r" not in read[:line]:
            return read[: line + 1 + len(_DATA)]
    return _DATA
