"""Server-sent events, parsed as the HTML standard defines them (section 9.2.6).

Two entry points that agree on every input (a hypothesis test holds them to it):
- `SSEParser`: incremental, fed one network read at a time; the proxy and live clients use it.
- `events_with_times` / `event_payloads`: whole recorded streams, with each event stamped by the arrival time of
  the read that completed it; the scorer's hot path, with a fast path for the common `data: ...\n\n` framing.

Rules kept: lines end with CRLF, LF or CR; a line starting with ':' is a comment; `field: value` loses one leading
space; a line without ':' is a field with an empty value; `data` lines are joined with LF; an empty line dispatches
the event unless its data is empty; a leading BOM is dropped; an event not ended by an empty line when the stream
ends is not dispatched (`SSEParser.pending` says one was cut); bytes that are not UTF-8 read as U+FFFD, one per
invalid sequence, on every path.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate, repeat

_BOM = "\ufeff"


@dataclass(slots=True)
class SSEEvent:
    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None
    comments: int = 0


class SSEParser:
    def __init__(self) -> None:
        self._buf = b""
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None
        self._comments = 0
        self._started = False
        self._last_cr = False

    @property
    def pending(self) -> bool:
        """True if bytes or fields of an event not yet ended by an empty line are held."""
        return bool(self._buf.strip(b"\r\n") or self._data or self._event)

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        out: list[SSEEvent] = []
        buf = self._buf + chunk if self._buf else chunk
        if self._last_cr and buf.startswith(b"\n"):
            buf = buf[1:]  # the LF of a CRLF split across reads
        self._last_cr = False
        start = 0
        n = len(buf)
        while start < n:
            lf = buf.find(b"\n", start)
            cr = buf.find(b"\r", start, lf if lf >= 0 else n)
            if cr >= 0:
                end, nxt = cr, cr + 1
                if nxt < n and buf[nxt] == 0x0A:
                    nxt += 1
                elif nxt == n:
                    self._last_cr = True
            elif lf >= 0:
                end, nxt = lf, lf + 1
            else:
                break
            self._line(buf[start:end], out)
            start = nxt
        self._buf = buf[start:]
        return out

    def _line(self, raw: bytes, out: list[SSEEvent]) -> None:
        line = raw.decode("utf-8", "replace")
        if not self._started:
            self._started = True
            if line.startswith(_BOM):
                line = line[1:]
        if not line:
            if self._data:
                out.append(
                    SSEEvent("\n".join(self._data), self._event or "message", self._id, self._retry, self._comments)
                )
            self._data = []
            self._event = ""
            self._retry = None
            self._comments = 0
            return
        if line[0] == ":":
            self._comments += 1
            return
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry" and value.isascii() and value.isdigit():  # ASCII digits only ("²" is a digit too)
            self._retry = int(value)


def events_with_times(chunks: Sequence[bytes], times: Sequence[int]) -> tuple[list[tuple[int, str]], bool]:
    """Every dispatched event's data, with the time of the read that completed it, and whether the stream ended
    inside an event. `times` are absolute (one per chunk, same length as `chunks`).

    Only `data` is returned: event names, ids and retry values do not matter to an OpenAI-style stream consumer.
    """
    stamps, payloads, pending = event_payloads(chunks, times)
    return [(t, d.decode("utf-8", "replace")) for t, d in zip(stamps, payloads, strict=True)], pending


def event_payloads(chunks: Sequence[bytes], times: Sequence[int]) -> tuple[list[int], list[bytes], bool]:
    """As `events_with_times`, as parallel lists, with each event's data left as UTF-8 bytes: a JSON parser takes
    them as they are, which saves a decode and orjson's re-encode per event on the scorer's hot path.

    The bytes are always valid UTF-8, whichever path a stream takes: a recorded byte sequence that is not UTF-8 comes
    back as U+FFFD (encoded), as the standard's decoding, `SSEParser` and `events_with_times` read it, so a JSON
    parser sees the same text a client does and the same stream never gives two answers."""
    data = b"".join(chunks)
    if b"\r" in data or data.startswith(b"\xef\xbb\xbf") or not _is_utf8(data):
        # Bytes that are not UTF-8 take the parser's path too: it decodes each line as the standard does (U+FFFD for
        # each invalid sequence), where the shortcuts below would hand the raw bytes on.
        return _slow_events(chunks, times)
    # The usual recording: each read is one whole `data: ...` event. Every read starting with `data: ` and ending
    # with LF LF, with no other LF anywhere, proves it with three C-level passes; then the read times are the event
    # times and nothing needs splitting.
    lfs = data.count(b"\n")
    n = len(chunks)
    if (
        lfs == 2 * n
        and all(map(bytes.endswith, chunks, repeat(b"\n\n")))
        and all(map(bytes.startswith, chunks, repeat(b"data: ")))
    ):
        return list(times), [c[6:-2] for c in chunks], False
    if lfs == 3 * n and n:
        # The Responses API's: each read one `event: NAME` line, one `data: ` line and the empty line. With 3n LFs,
        # lines 0, 3, 6... `event: ` lines and lines 1, 4, 7... `data: ` lines, the n empty lines that n reads ending
        # with LF LF hold can only be lines 2, 5, 8...: each read is exactly one such event (C-level passes, no loop).
        lines = data.split(b"\n")
        datas = lines[1::3]
        if (
            all(map(bytes.endswith, chunks, repeat(b"\n\n")))
            and all(map(bytes.startswith, datas, repeat(b"data: ")))
            and all(map(bytes.startswith, lines[0 : 3 * n : 3], repeat(b"event: ")))
        ):
            return list(times), [d[6:] for d in datas], False
    # One C-level split instead of a find per event: this runs for every event of every recorded stream.
    blocks = data.split(b"\n\n")
    events = blocks[:-1]
    tail = blocks[-1].lstrip(b"\n")
    ends = list(accumulate(map(len, chunks)))
    head = len(data) - len(blocks[-1])
    n = len(events)
    # Every LF belongs to a separator (no block holds a lone LF) and every block starts with `data: `: the framing
    # servers use, each event one `data: ` line. Checked with one C-level count and the slicing pass itself.
    if data.count(b"\n", 0, head) == 2 * n:
        payloads = [b[6:] for b in events if b.startswith(b"data: ")]
        if len(payloads) == n:
            # The event is complete once the read holding its second LF has arrived.
            event_ends = list(accumulate(len(b) + 2 for b in events))
            # One event per read is the usual recording: the read times are the event times.
            aligned = event_ends == ends[:n]
            stamps = list(times[:n]) if aligned else [times[bisect_left(ends, e)] for e in event_ends]
            return stamps, payloads, _tail_pending(tail)
    return _general_events(events, ends, times, tail)


def _is_utf8(data: bytes) -> bool:
    if data.isascii():
        return True
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


def _general_events(
    events: list[bytes], ends: list[int], times: Sequence[int], tail: bytes
) -> tuple[list[int], list[bytes], bool]:
    """LF-framed events with comments, other fields, multi-line data or extra empty lines."""
    stamps: list[int] = []
    payloads: list[bytes] = []
    ci = 0
    pos = 0
    for block in events:
        end = pos + len(block) + 2
        pos = end
        if not block:
            continue  # extra LFs between events are empty lines that dispatch nothing
        while ends[ci] < end:
            ci += 1
        if block[0] == 0x0A:
            block = block.lstrip(b"\n")
        if block.startswith(b"data: ") and b"\n" not in block:
            stamps.append(times[ci])
            payloads.append(block[6:])
        elif (
            # `event: NAME` then one `data: ` line: how the Responses API frames every event.
            block.startswith(b"event: ")
            and (nl := block.find(b"\n")) > 0
            and block.startswith(b"data: ", nl + 1)
            and block.find(b"\n", nl + 1) < 0
        ):
            stamps.append(times[ci])
            payloads.append(block[nl + 7 :])
        else:
            text = _block_data(block)
            if text is not None:
                stamps.append(times[ci])
                payloads.append(text.encode())
    return stamps, payloads, _tail_pending(tail)


def _tail_pending(tail: bytes) -> bool:
    """Whether bytes after the last dispatched event hold an unfinished event (as `SSEParser.pending` says)."""
    if not tail:
        return False
    if not tail.endswith(b"\n"):
        return True
    event = b""  # the last event: line's value counts, as in the parser (an empty one clears the name)
    for raw in tail[:-1].split(b"\n"):
        name, _sep, value = raw.partition(b":")
        if name == b"data":
            return True
        if name == b"event":
            event = value[1:] if value.startswith(b" ") else value
    return bool(event)


def _block_data(block: bytes) -> str | None:
    """The data of one LF-framed event block (no empty line inside), or None if it has none."""
    lines: list[str] = []
    for raw in block.split(b"\n"):
        line = raw.decode("utf-8", "replace")
        if not line or line[0] == ":":
            continue
        name, sep, value = line.partition(":")
        if name == "data":
            lines.append(value[1:] if sep and value.startswith(" ") else value)
    return "\n".join(lines) if lines else None


def _slow_events(chunks: Sequence[bytes], times: Sequence[int]) -> tuple[list[int], list[bytes], bool]:
    parser = SSEParser()
    stamps: list[int] = []
    payloads: list[bytes] = []
    for chunk, t in zip(chunks, times, strict=True):
        for ev in parser.feed(chunk):
            stamps.append(t)
            payloads.append(ev.data.encode())
    return stamps, payloads, parser.pending


def without_done(stamps: list[int], payloads: list[bytes]) -> tuple[list[int], list[bytes]]:
    """The events less OpenAI's end marker `[DONE]` (no event of the answer; some gateways end every stream with it,
    the Responses API too), with their times."""
    kept = [i for i, data in enumerate(payloads) if data != b"[DONE]"]
    return [stamps[i] for i in kept], [payloads[i] for i in kept]
