"""A run's shape, guessed from two reads (or two events of one read) that differ in its holes: the bytes before the
first hole, between an integer hole and the string (a numbered run's), between the string and a second string (a
paired run's), and after the last. A guess only: bench.core.run_proofs proves every read against it.
"""

from __future__ import annotations

_DIGITS = frozenset(b"0123456789")


# A run's shape: the bytes before its hole(s), between its integer and its string (a numbered run's), between its
# string and its second string (a paired run's), after them.
Shape = tuple[bytes, bytes | None, bytes | None, bytes]


def shape_at(a: bytes, b: bytes, head: bytes, tail: bytes, numbered: bool) -> Shape | None:
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


def event_shape(read: bytes, head: bytes, tail: bytes, numbered: bool) -> Shape | None:
    """The shape of the first two whole events of a read that holds several (its first piece may be an event's end,
    its last one's start)."""
    events = read.split(tail)
    if len(events) < 4:
        return None
    return shape_at(events[1] + tail, events[2] + tail, head, tail, numbered)


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
    a_end = _unescaped_quote(a, opening + 1)  # the first string's closing quote
    if a_end == closing:
        return a[:opening], None, a[closing + 1 :]
    b_end = _unescaped_quote(b, opening + 1)
    a_start, b_start = _string_start(a, closing), _string_start(b, len(b) - len(a) + closing)
    if a_end is None or b_end is None or a_start is None or b_start is None:
        return None
    rest = a[a_end + 1 : a_start]
    if not rest or rest != b[b_end + 1 : b_start]:
        return None
    return a[:opening], rest, a[closing + 1 :]


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
    a_end, b_end = digits_end(a, start), digits_end(b, start)
    if start < len(head) or same >= max(a_end, b_end) or a_end == start or b_end == start:
        return None  # the first difference is not in an integer
    return start, a_end, b_end


def digits_end(a: bytes, at: int) -> int:
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
