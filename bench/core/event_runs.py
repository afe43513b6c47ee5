"""A run of recorded reads that differ only in one JSON string: found, proved byte by byte and decoded in one call.

A streamed answer is mostly reads that are the same bytes but for one string: `data: {...,"delta":{"content":"` +
the token + `"},...}` + LF LF. Parsing each as JSON builds five objects per token and scans ~230 bytes to keep one
string; here the shared bytes are checked once per read (C-level prefix and suffix compares) and all the strings
are decoded in one call. What the string means (which field of a chunk or event it fills) is the caller's to prove,
by decoding the template with two different strings in its place (`Run.template`).

Where a run's shape comes from: bench.core.run_shapes (two neighbouring reads, or two events of one read); how its
reads are proved to be that shape with its holes filled: bench.core.run_proofs. Reads that hold several events, or
cut one in two, are split into events and proved alike, each event timed by the read that holds its end.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import accumulate, repeat
from typing import NamedTuple

from bench.core.run_proofs import MIN_RUN, around, counted, decoded, numbered_middles, proved
from bench.core.run_shapes import Shape, event_shape, shape_at
from bench.core.sse import event_payloads, without_done


@dataclass(slots=True)
class Run:
    """Reads `start`..`end` (exclusive) of a stream: each `prefix + JSON string + suffix`, the strings in `values`;
    in a numbered run `prefix + integer + between + JSON string + suffix`; in a paired run a second JSON string after
    the first, `rest` the bytes between them (`... + JSON string + rest + other JSON string + suffix`)."""

    start: int
    end: int
    prefix: bytes
    suffix: bytes
    values: list[str]
    between: bytes | None = None
    # The read that holds each event's end, when they are not one a read (None: event i is read start + i).
    held: list[int] | None = None
    rest: bytes | None = None

    def bulk(self, times: Sequence[int]) -> tuple[list[int], list[str]]:
        """The times and strings of the run's events after its first read (that read is parsed with the reads before
        the run: it sets the state the rest continues)."""
        if self.held is None:
            return list(times[self.start + 1 : self.end]), self.values[1:]
        after = bisect_right(self.held, self.start)
        return [times[i] for i in self.held[after:]], self.values[after:]

    def template(
        self, value: bytes, head: int = 0, tail: int = 0, number: bytes = b"1", other: bytes = b'"o"'
    ) -> bytes:
        """A read of this run's shape with the JSON string `value` in the hole (and `number` in a numbered run's
        integer hole, `other` in a paired run's second hole), less `head` bytes at the start and `tail` at the end
        (a read's SSE framing)."""
        hole = value if self.between is None else number + self.between + value
        if self.rest is not None:
            hole += self.rest + other
        whole = self.prefix + hole + self.suffix
        return whole[head : len(whole) - tail]


def ignores_other(run: Run, decode: Callable[[bytes], object], expected: object, head: int, tail: int) -> bool:
    """Whether a paired run's other string (OpenAI's obfuscation) is a value the caller's decoding does not keep:
    another string, and a number (no key can be one), there decode as `expected` (the template with "A" in its hole,
    `head` and `tail` bytes of SSE framing cut), so any string there does."""
    if decode(run.template(b'"A"', head, tail, other=b'"P"')) != expected:
        return False
    return decode(run.template(b'"A"', head, tail, other=b"0")) == expected


def find_run(reads: Sequence[bytes], head: bytes, tail: bytes, numbered: bool = False) -> Run | None:
    """The longest run of reads around the middle of the stream that start with `head`, end with `tail` and differ
    from each other only in one JSON string (`numbered`: in an integer and then a JSON string), or in that string and
    a second one after it (a paired run), or None. `head`/`tail` (a read's SSE framing, e.g. `data: ` and LF LF) must
    be in the shared bytes; the bytes shared must be ASCII and hold no CR or LF besides `head`'s and `tail`'s."""
    n = len(reads)
    if n < MIN_RUN:
        return None
    shape: Shape | None = None
    # Two neighbouring reads in the middle: the same token twice in a row gives no hole, so a few pairs are tried.
    for at in (n // 2, n // 2 + 1, n // 3, 2 * n // 3):
        if at + 1 >= n:
            continue
        shape = shape_at(reads[at], reads[at + 1], head, tail, numbered)
        if shape is not None:
            break
    else:
        # Every read holds several events (a fast server, reads coalesced): the shape from two events in a read.
        at = n // 2
        shape = event_shape(reads[at], head, tail, numbered) if tail == b"\n\n" else None
        if shape is None:
            return None
    prefix, _, rest, suffix = shape
    # Usually every read from the first of the shape's start to the last of its end is in the run: proved at once.
    first = next((i for i in range(at + 1) if reads[i].startswith(prefix)), None)
    if first is None:
        return None
    last = next((j for j in range(n - 1, at, -1) if reads[j].endswith(suffix) and (not rest or rest in reads[j])), at)
    if last + 1 - first < MIN_RUN:
        return _read_by_read(reads, at, shape)
    run = _aligned(reads, first, last + 1, shape)
    if run is None and tail == b"\n\n":
        # Reads that hold several events, or an event cut across reads: the same proof over the events.
        run = _by_events(reads, first, last + 1, shape)
    return run if run is not None else _read_by_read(reads, at, shape)


def _aligned(reads: Sequence[bytes], start: int, end: int, shape: Shape) -> Run | None:
    """Reads `start`..`end` as a run of one event each, or None."""
    prefix, between, rest, suffix = shape
    if between is not None:
        # A numbered run whose integers count up by one (a stream's sequence numbers) is proved with its strings.
        strings = counted(reads, start, end, prefix, between, suffix)
        values = None if strings is None else decoded(strings, rest)
    else:
        middles = proved(reads, start, end, prefix, suffix)
        values = None if middles is None else decoded(middles, rest)
    return None if values is None else Run(start, end, prefix, suffix, values, between, rest=rest)


def _by_events(reads: Sequence[bytes], start: int, end: int, shape: Shape) -> Run | None:
    """Reads `start`..`end` as a run whose events lie across reads as they came (several in a read, one cut in two),
    or None. The reads joined are split at LF LF (in a run only an event's end holds one: its shared bytes hold no
    other, its strings no LF), each event proved as a read is, and each event's time is the time of the read that
    holds its end. The run begins and ends (for the parser) where a read ends with an event: the reads up to its
    first such read are parsed with the reads before the run; reads from the first event of another shape on, with
    the reads after it."""
    prefix, between, rest, suffix = shape
    events = b"".join(reads[start:end]).split(b"\n\n")
    if events.pop():
        return None  # the last read does not end an event
    read_ends = list(accumulate(map(len, reads[start:end])))
    event_ends = list(accumulate(map(len, events), lambda total, size: total + size + 2, initial=0))[1:]
    fits = list(map(bytes.startswith, events, repeat(prefix)))
    if not all(fits):
        # The region's last reads hold events of another shape (a response's last events end like a delta):
        # the run ends at the last read that ends with an event before the first of them.
        limit = event_ends[fits.index(False) - 1] if fits[0] else 0
        last = bisect_right(read_ends, limit) - 1
        while last >= 0 and not _among(event_ends, read_ends[last]):
            last -= 1
        if last < 0:
            return None
        end = start + last + 1
        del read_ends[last + 1 :], events[bisect_left(event_ends, read_ends[last]) + 1 :]
        del event_ends[len(events) :]
    run = _aligned(events, 0, len(events), (prefix, between, rest, suffix[:-2]))
    first = next((i for i, at in enumerate(read_ends) if _among(event_ends, at)), None)
    if run is None or first is None or len(events) < MIN_RUN:
        return None
    held = [start + i for i in map(bisect_left, repeat(read_ends), event_ends)]
    return Run(start + first, end, prefix, suffix, run.values, between, held, rest)


def _among(ordered: list[int], value: int) -> bool:
    at = bisect_left(ordered, value)
    return at < len(ordered) and ordered[at] == value


def _read_by_read(reads: Sequence[bytes], at: int, shape: Shape) -> Run | None:
    """The run of one-event reads around read `at`, each read's prefix and suffix compared on its own (a read of
    another shape inside; in a paired run, a read without the second string)."""
    prefix, between, rest, suffix = shape
    middles = around(reads, at, prefix, suffix, rest)
    if middles is None:
        return None
    start, end, pieces = middles
    strings = pieces if between is None else numbered_middles(pieces, between)
    values = None if strings is None else decoded(strings, rest)
    return None if values is None else Run(start, end, prefix, suffix, values, between, rest=rest)


class Outside(NamedTuple):
    """The events of a stream's reads outside its run, `[DONE]` taken out: their times and payloads, how many come
    before the run, whether the stream ended inside an event, whether a `[DONE]` came."""

    times: list[int]
    payloads: list[bytes]
    before: int
    cut: bool
    done: bool


def outside(reads: Sequence[bytes], times: Sequence[int], run: Run) -> Outside:
    """The reads before the run (with the run's first: it sets the state the run continues) and after it, split into
    events as one stream: as the whole stream splits them, since the run's reads are whole events (LF LF), so where
    the reads after it start the parser is where it was after the run's first read (and a BOM there is data, as in
    the whole stream). Each event's time is the time of the read that completed it."""
    first, end = run.start + 1, run.end
    kept = [*range(first), *range(end, len(reads))]
    at, payloads, cut = event_payloads([*reads[:first], *reads[end:]], kept)
    done = b"[DONE]" in payloads
    if done:
        at, payloads = without_done(at, payloads)
    return Outside([times[i] for i in at], payloads, bisect_left(at, first), cut, done)
