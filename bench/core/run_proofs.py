"""Proofs that reads are a run's template with its holes filled (bench.core.event_runs): every byte of every read
accounted for, each hole exactly one JSON string (or integer), decoded in one call.

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
piece must start with `between` (C-level compares) and the rest is proved a JSON string as above. When the
integers count up by one (a stream's sequence numbers) they are written from a table of decimals into the expected
bytes instead, and checked by the same compare of the reads joined (`counted`).

A paired run (OpenAI's streams: random characters in an `obfuscation` field of every delta event, by default) has a
third hole, a second JSON string after the first: each middle (after the integer in a numbered run) is `JSON string +
rest + JSON string`, `rest` the shared bytes between them. Proved on the middles joined with `,LF` and each `rest`
replaced by `,CR` (`_paired_strings`): CR and LF must alternate, one CR a middle, and the whole must decode as twice as
many strings as middles. Neither can be in a string, so each comma before them is the array's, all of its commas: one
string between each two. The caller proves that the second string does not matter to what it decodes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import repeat
from operator import and_, itemgetter

import msgspec

from bench.core.run_shapes import digits_end

# Shorter runs cost more to prove than they save.
MIN_RUN = 8
_STRINGS = msgspec.json.Decoder(list[str])


# A middle's integer: JSON's (no sign, no leading zero), ASCII digits, all of them (`between` starts with no digit).
_NUMBER = re.compile(rb"\n(?:0|[1-9][0-9]*)(?![0-9])")


# A paired run's proof keeps only the line breaks of its text: CR (a `rest`) and LF (between middles) in turn.
_NOT_LINE_BREAKS = bytes(sorted(set(range(256)) - {0x0A, 0x0D}))


Middles = tuple[int, int, list[bytes]]


def proved(reads: Sequence[bytes], start: int, end: int, prefix: bytes, suffix: bytes) -> list[bytes] | None:
    """The middles of reads `start`..`end`, if each is `prefix + middle + suffix`, else None. The reads joined must
    equal the prefix, the middles joined with `suffix + prefix`, and the suffix: the pieces line up read by read
    (equal lengths; a read shorter than prefix and suffix makes them unequal)."""
    part = reads[start:end]
    middles = _middles(part, prefix, suffix)
    return middles if b"".join(part) == prefix + (suffix + prefix).join(middles) + suffix else None


def _middles(reads: Sequence[bytes], prefix: bytes, suffix: bytes) -> list[bytes]:
    """What lies in each read between the prefix's length and the suffix's."""
    return list(map(itemgetter(slice(len(prefix), -len(suffix) or None)), reads))


def counted(
    reads: Sequence[bytes], start: int, end: int, prefix: bytes, between: bytes, suffix: bytes
) -> list[bytes] | None:
    """The middles' strings of reads `start`..`end`, if their integers count up by one from the first read's and
    each read is `prefix + integer + between + string + suffix`, else None. The integers' widths are known from the
    count, so each read's string is sliced where it must start; the reads joined must then equal the pieces joined
    (lined up read by read, as in `proved`), the integers written as JSON writes them."""
    at = len(prefix)
    first = reads[start]
    width = digits_end(first, at) - at
    if not 0 < width <= 6:
        return None
    low = int(first[at : at + width])
    if low + end - start > MAX_COUNTED:
        return None
    numbers = _decimals(low, low + end - start)
    strings: list[bytes] = []
    for i, j, w in _widths(low, low + end - start):
        slicer = itemgetter(slice(at + w + len(between), -len(suffix) or None))
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


def around(reads: Sequence[bytes], at: int, prefix: bytes, suffix: bytes, rest: bytes | None) -> Middles | None:
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
    return start, end, _middles(reads[start:end], prefix, suffix)


def decoded(middles: list[bytes], rest: bytes | None) -> list[str] | None:
    """The strings, if each middle is one JSON string (a paired run's: one, `rest` and another), else None."""
    return _strings(middles) if rest is None else _paired_strings(rest, middles)


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


def numbered_middles(middles: list[bytes], between: bytes) -> list[bytes] | None:
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
