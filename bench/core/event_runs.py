"""A run of recorded reads that differ only in one JSON string: found, proved byte by byte and decoded in one call.

A streamed answer is mostly reads that are the same bytes but for one string: `data: {...,"delta":{"content":"` +
the token + `"},...}` + LF LF. Parsing each as JSON builds five objects per token and scans ~230 bytes to keep one
string; here the shared bytes are checked once per read (C-level prefix and suffix compares) and all the strings
are decoded in one call. What the string means (which field of a chunk or event it fills) is the caller's to prove,
by decoding the template with two different strings in its place (`Run.template`).

Why the proof holds: each read is `prefix + middle + suffix` by comparison, and the middles joined with `,LF` decode
as a JSON array of exactly as many strings as there are middles. A JSON string cannot hold a raw LF, so no string
spans two middles; no middle can hold none (`[,` `,,` `,]` do not decode) so none holds two: each middle is exactly one
JSON string token, and each read is the template with that string in the hole. A middle must hold no CR or LF (JSON
whitespace around the string that would break the read's SSE line). Anything else (a read that differs elsewhere,
bytes that are not UTF-8, a second string) leaves the read out of the run or finds no run, and the stream takes the
general path: the same answer, slower.

A numbered run (the Responses API's events: a `sequence_number` before the delta) has a second hole, an integer before
the string: each middle is `digits + between + JSON string`, `between` the shared bytes in between. Proved on the
middles joined with LF (which they must not hold otherwise): one regex split at LF + a JSON integer (ASCII digits, no
sign, no leading zero, not followed by a digit) gives one piece per middle only if every middle starts with one; each
piece must start with `between` (C-level compares) and the rest is proved a JSON string as above.

A paired run (OpenAI's streams: random characters in an `obfuscation` field of every delta event, by default) has a
third hole, a second JSON string after the first: each middle (after the integer in a numbered run) is `JSON string +
rest + JSON string`, `rest` the shared bytes between them. Proved on the middles joined with `,LF` and each `rest`
replaced by `,CR` (`_paired_strings`): CR and LF must alternate, one CR a middle, and the whole must decode as twice as
many strings as middles. Neither can be in a string, so each comma before them is the array's, all of its commas: one
string between each two. The caller proves that the second string does not matter to what it decodes.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from itertools import accumulate, repeat
from operator import and_, itemgetter
from typing import NamedTuple

import msgspec

from bench.core.sse import event_payloads

_STRINGS = msgspec.json.Decoder(list[str])
# A middle's integer: JSON's (no sign, no leading zero), ASCII digits, all of them (`between` starts with no digit).
_NUMBER = re.compile(rb"\n(?:0|[1-9][0-9]*)(?![0-9])")
_DIGITS = frozenset(b"0123456789")
# A paired run's proof keeps only the line breaks of its text: CR (a `rest`) and LF (between middles) in turn.
_NOT_LINE_BREAKS = bytes(sorted(set(range(256)) - {0x0A, 0x0D}))
# Shorter runs cost more to prove than they save.
MIN_RUN = 8


class Run:
    """Reads `start`..`end` (exclusive) of a stream: each `prefix + JSON string + suffix`, the strings in `values`;
    in a numbered run `prefix + integer + between + JSON string + suffix`; in a paired run a second JSON string after
    the first, `rest` the bytes between them (`... + JSON string + rest + other JSON string + suffix`)."""

    __slots__ = ("between", "end", "held", "prefix", "rest", "start", "suffix", "values")

    def __init__(
        self,
        start: int,
        end: int,
        prefix: bytes,
        suffix: bytes,
        values: list[str],
        between: bytes | None = None,
        held: list[int] | None = None,
        rest: bytes | None = None,
    ) -> None:
        self.start = start
        self.end = end
        self.prefix = prefix
        self.suffix = suffix
        self.values = values
        self.between = between
        # The read that holds each event's end, when they are not one a read (None: event i is read start + i).
        self.held = held
        self.rest = rest

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
        shape = _shape_at(reads[at], reads[at + 1], head, tail, numbered)
        if shape is not None:
            break
    else:
        # Every read holds several events (a fast server, reads coalesced): the shape from two events in a read.
        at = n // 2
        shape = _event_shape(reads[at], head, tail, numbered) if tail == b"\n\n" else None
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


# A run's shape: the bytes before its hole(s), between its integer and its string (a numbered run's), between its
# string and its second string (a paired run's), after them.
Shape = tuple[bytes, bytes | None, bytes | None, bytes]


def _event_shape(read: bytes, head: bytes, tail: bytes, numbered: bool) -> Shape | None:
    """The shape of the first two whole events of a read that holds several (its first piece may be an event's end,
    its last one's start)."""
    events = read.split(tail)
    if len(events) < 4:
        return None
    return _shape_at(events[1] + tail, events[2] + tail, head, tail, numbered)


def _aligned(reads: Sequence[bytes], start: int, end: int, shape: Shape) -> Run | None:
    """Reads `start`..`end` as a run of one event each, or None."""
    prefix, between, rest, suffix = shape
    if between is not None:
        # A numbered run whose integers count up by one (a stream's sequence numbers) is proved with its strings.
        strings = _counted(reads, start, end, prefix, between, suffix)
        values = None if strings is None else _decoded(strings, rest)
    else:
        middles = _proved(reads, start, end, prefix, suffix)
        values = None if middles is None else _decoded(middles[2], rest)
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
    middles = _around(reads, at, prefix, suffix, rest)
    if middles is None:
        return None
    start, end, pieces = middles
    strings = pieces if between is None else _numbered_middles(pieces, between)
    values = None if strings is None else _decoded(strings, rest)
    return None if values is None else Run(start, end, prefix, suffix, values, between, rest=rest)


def _decoded(middles: list[bytes], rest: bytes | None) -> list[str] | None:
    """The strings, if each middle is one JSON string (a paired run's: one, `rest` and another), else None."""
    return _strings(middles) if rest is None else _paired_strings(rest, middles)


Middles = tuple[int, int, list[bytes]]


def _string_end(a: bytes, opening: int) -> int | None:
    """The closing quote of the JSON string that opens at `opening`: the next quote no odd run of backslashes
    escapes; None if none."""
    at = a.find(b'"', opening + 1)
    while at > 0 and _escaped(a, at):
        at = a.find(b'"', at + 1)
    return at if at > 0 else None


def _unescaped_quote(a: bytes, at: int) -> int | None:
    """The first quote from `at` on that no odd run of backslashes escapes (a string's end, inside one), or None."""
    at = a.find(b'"', at)
    while at > 0 and _escaped(a, at):
        at = a.find(b'"', at + 1)
    return at if at >= 0 else None


def _escaped(a: bytes, at: int) -> bool:
    k = at
    while k and a[k - 1] == 0x5C:  # a backslash
        k -= 1
    return (at - k) % 2 == 1


def _proved(reads: Sequence[bytes], start: int, end: int, prefix: bytes, suffix: bytes) -> Middles | None:
    """Reads `start`..`end` and their middles, if each is `prefix + middle + suffix`, else None. A middle is what lies
    between the prefix's length and the suffix's; the reads joined must equal the prefix, the middles joined with
    `suffix + prefix`, and the suffix: the pieces line up read by read (equal lengths; a read shorter than prefix and
    suffix makes them unequal)."""
    part = reads[start:end]
    middles = list(map(itemgetter(slice(len(prefix), -len(suffix) or None)), part))
    if b"".join(part) != prefix + (suffix + prefix).join(middles) + suffix:
        return None
    return start, end, middles


def _counted(
    reads: Sequence[bytes], start: int, end: int, prefix: bytes, between: bytes, suffix: bytes
) -> list[bytes] | None:
    """The middles' strings of reads `start`..`end`, if their integers count up by one from the first read's and
    each read is `prefix + integer + between + string + suffix`, else None. The integers' widths are known from the
    count, so each read's string is sliced where it must start; the reads joined must then equal the pieces joined
    (lined up read by read, as in `_proved`), the integers written as JSON writes them."""
    at = len(prefix)
    first = reads[start]
    width = _digits_end(first, at) - at
    if not 0 < width <= 6:
        return None
    low = int(first[at : at + width])
    if low + end - start > MAX_COUNTED:
        return None
    numbers = _decimals(low, low + end - start)
    strings: list[bytes] = []
    cut = at + len(between) + len(suffix)
    for i, j, w in _widths(low, low + end - start):
        slicer = itemgetter(slice(cut - len(suffix) + w, -len(suffix) or None))
        strings += map(slicer, reads[start + i - low : start + j - low])
    k = end - start  # the widths' pieces cover the count: k strings, k integers
    # The reads as they must be, `prefix, integer, between, string, suffix` each, laid out by C-level slice stores.
    pieces: list[bytes] = [prefix] * (5 * k)
    pieces[1::5], pieces[2::5], pieces[3::5], pieces[4::5] = numbers, [between] * k, strings, [suffix] * k
    return strings if b"".join(reads[start:end]) == b"".join(pieces) else None


# The decimal digits of 0, 1, 2...: grown as streams need them (a 300-token answer counts to ~310), up to a bound a
# stream's own numbers cannot push past (a longer count takes the general proof).
_DECIMALS: list[bytes] = []
MAX_COUNTED = 1 << 17


def _decimals(low: int, high: int) -> list[bytes]:
    if len(_DECIMALS) < high:
        _DECIMALS.extend(str(i).encode() for i in range(len(_DECIMALS), max(high, 2 * len(_DECIMALS), 1024)))
    return _DECIMALS[low:high]


def _widths(low: int, high: int) -> list[tuple[int, int, int]]:
    """`low`..`high` cut where their decimal width changes: (from, to, width)."""
    out = []
    while low < high:
        width = len(str(low))
        top = min(high, 10**width)
        out.append((low, top, width))
        low = top
    return out


def _around(reads: Sequence[bytes], at: int, prefix: bytes, suffix: bytes, rest: bytes | None) -> Middles | None:
    """The run around read `at` and its middles, each read's prefix and suffix compared on its own (a read of
    another shape inside), and in a paired run its holding `rest` (a read without the second string)."""
    n = len(reads)
    fits = list(map(and_, map(bytes.startswith, reads, repeat(prefix)), map(bytes.endswith, reads, repeat(suffix))))
    if rest:
        fits = list(map(and_, fits, map(bytes.__contains__, reads, repeat(rest))))
    start = at
    while start and fits[start - 1]:
        start -= 1
    try:
        end = fits.index(False, at)
    except ValueError:
        end = n
    if end - start < MIN_RUN:
        return None
    return start, end, list(map(itemgetter(slice(len(prefix), -len(suffix) or None)), reads[start:end]))


def _strings(middles: list[bytes]) -> list[str] | None:
    """The strings, if each middle is exactly one JSON string token (with no CR or LF around it), else None."""
    text = b",\n".join(middles)
    if text.count(b"\n") != len(middles) - 1 or b"\r" in text:
        return None  # JSON whitespace around a string, but a line break in the read's SSE data line
    try:
        values = _STRINGS.decode(b"[" + text + b"]")
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return values if len(values) == len(middles) else None


def _paired_strings(rest: bytes, middles: list[bytes]) -> list[str] | None:
    """The first strings, if each middle is exactly one JSON string token, `rest` and one JSON string token (no CR or
    LF around them), else None. Proved on the middles joined with `,` LF (which they must not hold otherwise) with
    each `rest` replaced by `,` CR: the CRs and LFs alternate, one CR per middle (no `rest` spans two middles: it holds
    no LF and does not end with the comma before one) and the whole decodes as a JSON array of twice as many strings
    as middles. A JSON string holds no raw CR or LF, so the comma before each is the array's: these are all its
    commas, and between each two of them lies exactly one string."""
    n = len(middles)
    text = b",\n".join(middles)
    if b"\r" in text or b"\n" in rest or rest.endswith(b","):
        return None
    # Split and joined again, as `text.replace(rest, b",\r")` but faster (no count of the matches first); the
    # brackets put on the ends, not by copying the whole.
    pieces = text.split(rest)
    pieces[0], pieces[-1] = b"[" + pieces[0], pieces[-1] + b"]"
    paired = b",\r".join(pieces)  # its LFs are the text's: their count is proved with the CRs'
    if paired.translate(None, _NOT_LINE_BREAKS) != b"\r\n" * (n - 1) + b"\r":
        return None
    try:
        values = _STRINGS.decode(paired)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return values[::2] if len(values) == 2 * n else None


def _numbered_middles(middles: list[bytes], between: bytes) -> list[bytes] | None:
    """What follows `between` in each middle, if each middle is exactly a JSON integer of ASCII digits and `between`
    and then that, else None."""
    n = len(middles)
    text = b"\n" + b"\n".join(middles)
    if text.count(b"\n") != n:
        return None
    # Every LF starts a middle: n pieces after the split's first (empty) one iff every middle starts with an integer.
    rests = _NUMBER.split(text)
    if len(rests) != n + 1 or rests[0]:
        return None
    del rests[0]
    if not all(map(bytes.startswith, rests, repeat(between))):
        return None
    return list(map(itemgetter(slice(len(between), None)), rests))


def _shape_at(a: bytes, b: bytes, head: bytes, tail: bytes, numbered: bool) -> Shape | None:
    """The shape of the run `a` and `b` are in, `(prefix, between, rest, suffix)`: the bytes before the one string in
    which they differ (`numbered`: before the integer in which they first differ, and `between` it and that string),
    or two strings (a paired run's: `rest` the bytes between them), and after it; or None. The bytes shared besides
    `head` and `tail` must be ASCII without CR or LF."""
    if numbered:
        ends = _integer(a, b, head)
        holes = None if ends is None else _holes(a[ends[1] :], b[ends[2] :], tail)
        if ends is None or holes is None or not holes[0]:
            return None
        prefix, between = a[: ends[0]], holes[0]
    else:
        holes = _holes(a, b, tail)
        if holes is None:
            return None
        prefix, between = holes[0], None
    _, rest, suffix = holes
    shared = prefix[len(head) :] + (between or b"") + (rest or b"") + suffix[: len(suffix) - len(tail)]
    if not (prefix.startswith(head) and suffix.endswith(tail) and shared.isascii()):
        return None
    if b"\n" in shared or b"\r" in shared:
        return None
    return prefix, between, rest, suffix


def _holes(a: bytes, b: bytes, tail: bytes) -> tuple[bytes, bytes | None, bytes] | None:
    """The bytes before the first string in which `a` and `b` differ, between it and the last string in which they
    differ (the same in both; None if that is the first), and after that; or None."""
    same = _common_prefix(a, b)
    if same == len(a) == len(b):
        return None
    opening = a.rfind(b'"', 0, same)  # the first string's opening quote: the last one before they differ
    closing = _unescaped_quote(a, len(a) - _common_suffix(a, b))  # the last one's closing quote, after they do
    if opening < 0 or closing is None or closing <= opening or closing >= len(a) - len(tail):
        return None
    a_end = _string_end(a, opening)
    if a_end == closing:
        return a[:opening], None, a[closing + 1 :]
    b_end = _string_end(b, opening)
    a_start, b_start = _string_start(a, closing), _string_start(b, len(b) - len(a) + closing)
    if a_end is None or b_end is None or a_start is None or b_start is None:
        return None
    rest = a[a_end + 1 : a_start]
    if not rest or rest != b[b_end + 1 : b_start]:
        return None
    return a[:opening], rest, a[closing + 1 :]


def _string_start(a: bytes, closing: int) -> int | None:
    """The opening quote of the JSON string that closes at `closing` (every quote inside it escaped), or None."""
    at = a.rfind(b'"', 0, closing)
    while at > 0 and _escaped(a, at):
        at = a.rfind(b'"', 0, at)
    return at if at > 0 else None


def _integer(a: bytes, b: bytes, head: bytes) -> tuple[int, int, int] | None:
    """Where the integer in which `a` and `b` first differ starts, and where it ends in each; or None."""
    same = _common_prefix(a, b)
    start = same
    while start and a[start - 1] in _DIGITS:
        start -= 1  # the integer's first digit: the prefix ends with a byte that is no digit
    a_end, b_end = _digits_end(a, start), _digits_end(b, start)
    if start < len(head) or same >= max(a_end, b_end) or a_end == start or b_end == start:
        return None  # the first difference is not in an integer
    return start, a_end, b_end


def _digits_end(a: bytes, at: int) -> int:
    while at < len(a) and a[at] in _DIGITS:
        at += 1
    return at


def _common_prefix(a: bytes, b: bytes) -> int:
    # The highest bit in which the two differ, read as big-endian integers: C-level, ~1 us for a 280-byte read.
    m = min(len(a), len(b))
    differ = int.from_bytes(a[:m]) ^ int.from_bytes(b[:m])
    return m - (differ.bit_length() + 7) // 8


def _common_suffix(a: bytes, b: bytes) -> int:
    m = min(len(a), len(b))
    differ = int.from_bytes(a[len(a) - m :], "little") ^ int.from_bytes(b[len(b) - m :], "little")
    return m - (differ.bit_length() + 7) // 8


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
        keep = [i for i, data in enumerate(payloads) if data != b"[DONE]"]
        at, payloads = [at[i] for i in keep], [payloads[i] for i in keep]
    return Outside([times[i] for i in at], payloads, bisect_left(at, first), cut, done)
