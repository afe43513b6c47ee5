"""A run of recorded reads that differ only in one JSON string: found, proved byte by byte and decoded in one call.

A streamed answer is mostly reads that are the same bytes but for one string: `data: {...,"delta":{"content":"` +
the token + `"},...}` + LF LF. Parsing each as JSON builds five objects per token and scans ~230 bytes to keep one
string; here the shared bytes are checked once per read (C-level prefix and suffix compares) and all the strings
are decoded in one call. What the string means (which field of a chunk or event it fills) is the caller's to prove,
by decoding the template with two different strings in its place (`Run.template`).

Why the proof holds: each read is `prefix + middle + suffix` by comparison, and the middles joined with `,LF` decode
as a JSON array of exactly as many strings as there are middles. A JSON string cannot hold a raw LF, so no string
spans two middles; no middle can hold none (`[,` `,,` `,]` do not decode) so none holds two: each middle is exactly one
JSON string token, and each read is the template with that string in the hole. Anything else (a read that differs
elsewhere, bytes that are not UTF-8, a second string) leaves the read out of the run or finds no run, and the stream
takes the general path: the same answer, slower.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat
from operator import and_, itemgetter

import msgspec

_STRINGS = msgspec.json.Decoder(list[str])
# Shorter runs cost more to prove than they save.
MIN_RUN = 8


class Run:
    """Reads `start`..`end` (exclusive) of a stream: each `prefix + JSON string + suffix`, the strings in `values`."""

    __slots__ = ("end", "prefix", "start", "suffix", "values")

    def __init__(self, start: int, end: int, prefix: bytes, suffix: bytes, values: list[str]) -> None:
        self.start = start
        self.end = end
        self.prefix = prefix
        self.suffix = suffix
        self.values = values

    def template(self, value: bytes, head: int = 0, tail: int = 0) -> bytes:
        """A read of this run's shape with the JSON string `value` in the hole, less `head` bytes at the start and
        `tail` at the end (a read's SSE framing)."""
        whole = self.prefix + value + self.suffix
        return whole[head : len(whole) - tail]


def find_run(reads: Sequence[bytes], head: bytes, tail: bytes) -> Run | None:
    """The longest run of reads around the middle of the stream that start with `head`, end with `tail` and differ
    from each other only in one JSON string, or None. `head`/`tail` (a read's SSE framing, e.g. `data: ` and LF LF)
    must be in the shared bytes; the bytes shared must be ASCII and hold no CR or LF besides `tail`'s."""
    n = len(reads)
    if n < MIN_RUN:
        return None
    # Two neighbouring reads in the middle: the same token twice in a row gives no hole, so a few pairs are tried.
    for at in (n // 2, n // 2 + 1, n // 3, 2 * n // 3):
        shape = _shape(reads[at], reads[at + 1], head, tail) if at + 1 < n else None
        if shape is not None:
            break
    else:
        return None
    prefix, suffix = shape
    # Usually every read from the first of the shape's start to the last of its end is in the run: proved at once.
    first = next(i for i in range(at + 1) if reads[i].startswith(prefix))
    last = next((j for j in range(n - 1, at, -1) if reads[j].endswith(suffix)), at)
    whole = _proved(reads, first, last + 1, prefix, suffix) if last + 1 - first >= MIN_RUN else None
    return whole if whole is not None else _around(reads, at, prefix, suffix)


def _proved(reads: Sequence[bytes], start: int, end: int, prefix: bytes, suffix: bytes) -> Run | None:
    """Reads `start`..`end` as a run, or None. Each read's middle is what lies between the prefix's length and the
    suffix's; the reads joined must equal the prefix, the middles joined with `suffix + prefix`, and the suffix: the
    pieces line up read by read (equal lengths, a read shorter than prefix and suffix makes them unequal), so each
    read is `prefix + middle + suffix`."""
    part = reads[start:end]
    middles = list(map(itemgetter(slice(len(prefix), -len(suffix))), part))
    if b"".join(part) != prefix + (suffix + prefix).join(middles) + suffix:
        return None
    return _decoded(start, end, prefix, suffix, middles)


def _around(reads: Sequence[bytes], at: int, prefix: bytes, suffix: bytes) -> Run | None:
    """The run around read `at`, each read's prefix and suffix compared on its own (a read of another shape inside)."""
    n = len(reads)
    fits = list(map(and_, map(bytes.startswith, reads, repeat(prefix)), map(bytes.endswith, reads, repeat(suffix))))
    start = at
    while start and fits[start - 1]:
        start -= 1
    try:
        end = fits.index(False, at)
    except ValueError:
        end = n
    if end - start < MIN_RUN:
        return None
    return _decoded(
        start, end, prefix, suffix, list(map(itemgetter(slice(len(prefix), -len(suffix))), reads[start:end]))
    )


def _decoded(start: int, end: int, prefix: bytes, suffix: bytes, middles: list[bytes]) -> Run | None:
    """The run, if each middle is exactly one JSON string (the module's docstring says why this proves it)."""
    try:
        values = _STRINGS.decode(b"[" + b",\n".join(middles) + b"]")
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if len(values) != end - start:
        return None
    return Run(start, end, prefix, suffix, values)


def _shape(a: bytes, b: bytes, head: bytes, tail: bytes) -> tuple[bytes, bytes] | None:
    """The bytes before and after the one string in which `a` and `b` differ, or None."""
    same = _common_prefix(a, b)
    if same == len(a) == len(b):
        return None
    opening = a.rfind(b'"', 0, same)  # the string's opening quote: the last one before they differ
    back = _common_suffix(a, b)
    closing = a.find(b'"', len(a) - back)  # its closing quote: the first one after they differ again
    if opening < len(head) or closing < opening + 1 or closing >= len(a) - len(tail):
        return None
    prefix, suffix = a[:opening], a[closing + 1 :]
    shared = prefix[len(head) :] + suffix[: len(suffix) - len(tail)]
    if not (prefix.startswith(head) and suffix.endswith(tail) and shared.isascii()):
        return None
    if b"\n" in shared or b"\r" in shared:
        return None
    return prefix, suffix


def _common_prefix(a: bytes, b: bytes) -> int:
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # bisection on C-level compares: ~8 steps for a 230-byte read
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix(a: bytes, b: bytes) -> int:
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid :] == b[len(b) - mid :]:
            lo = mid
        else:
            hi = mid - 1
    return lo
