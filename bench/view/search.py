"""Full-text search over the prompts and answers of every result, on the server, bounded in memory.

The text is not in the scores file: it is in the cassettes, as requests and SSE streams. The first search starts a
background thread that reads every cassette once (a streaming read), parses each exchange a result names, and
appends its text (each message, tool call and tool result, the answer and its reasoning) to a temporary file that
bench view owns and deletes when it stops (never beside a cassette): the text as it was, and the same bytes with
ASCII letters lowered, at the same offsets. Searching is a scan of the lowered file through a memory map (the page
cache holds it, not the process), from entry to entry: a hit names its entry, the entry names its result, and the
scan jumps to the next entry. What the process keeps is two small arrays per entry (where it starts, whose it is).

A search while the text is still being read answers over what has been read, and says how far that is; asking
again later goes on from where the last scan of the same words stopped. A scan also stops at a time bound and says
so. Matching is case-insensitive for ASCII letters, exact for others; a multi-turn result's messages are written
once per result (a request repeats the conversation before it: a message already written for the same result in
the last few thousand is skipped).
"""

from __future__ import annotations

import bisect
import contextlib
import mmap
import tempfile
import threading
import time
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import stringzilla
import xxhash

from bench.core.cassette import CassetteReader
from bench.core.errors import CassetteError
from bench.core.parse import parse_exchange
from bench.core.storage import Location
from bench.view.transcript import request_messages

MAX_ENTRY = 64 * 1024  # bytes of text kept per exchange (a longer prompt or answer is searched in its first 64 KiB)
SEEN = 8192  # (result, message) pairs remembered to write a repeated message once
SCAN_SECONDS = 5.0  # one search's time bound; asking again goes on where it stopped
CHECK_EVERY = 256  # hits between two looks at the clock
SNIPPETS = 10_000  # results whose matching text is kept to show under their row (the rest: no snippet)
SNIPPET = 60  # characters of text either side of a hit
MAX_QUERY = 200  # characters searched for


class SearchState(msgspec.Struct):
    complete: bool  # every exchange read and every entry scanned
    searched: int  # exchanges whose text the scan covered
    of: int  # exchanges the results name
    ms: int  # this request's scan time
    why: str = ""  # why it is not complete


@dataclass
class _Found:
    """One query's hits so far, kept to page through them (and to go on scanning)."""

    rows: bytearray
    snippets: dict[int, str] = field(default_factory=dict)
    scanned_to: int = 0  # entries scanned


def fold(text: bytes) -> bytes:
    return text.lower()  # ASCII letters only: offsets stay those of the text as written


def _texts(record: Any) -> Iterator[str]:
    """Every text of one exchange: its request's messages, then the answer."""
    parsed = parse_exchange(record)
    messages, _ = request_messages(parsed.request_json)
    for _, m in messages:
        yield from (m.text, m.reasoning)
        for c in m.tool_calls:
            yield f"{c.name}({c.arguments})"
    yield from (parsed.reasoning, parsed.content, parsed.refusal)
    for call in parsed.tool_calls:
        yield f"{call.name}({call.arguments})"


class TextSearch:
    """`owner(cassette name, exchange id)` names the result (row number) an exchange belongs to, or None."""

    def __init__(
        self, cassettes: dict[str, Location], owner: Callable[[str, str], int | None], rows: int, exchanges: int
    ) -> None:
        self._cassettes = cassettes
        self._owner = owner
        self._rows = rows
        self.exchanges = exchanges
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        # Open for the server's life; unlinked as they are created (nothing is left behind, even by a kill).
        self._lowered = tempfile.TemporaryFile(prefix="bench-view-search-")  # noqa: SIM115
        self._text = tempfile.TemporaryFile(prefix="bench-view-text-")  # noqa: SIM115
        self._starts = array("q")  # per entry: its offset in both files
        self._owners = array("i")  # per entry: its row
        self._size = 0  # bytes written (entries whose start is below it are whole)
        self.read = 0  # exchanges read so far (whether or not they had text)
        self.done = False
        self.problems: list[str] = []
        self._cache: OrderedDict[bytes, _Found] = OrderedDict()

    def start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._build, name="bench-view-search", daemon=True)
                self._thread.start()

    def close(self) -> None:
        self._lowered.close()
        self._text.close()

    # -- building -------------------------------------------------------------------------------------------------

    def _build(self) -> None:
        seen: OrderedDict[tuple[int, int], None] = OrderedDict()
        for name, where in self._cassettes.items():
            try:
                for record in CassetteReader(where):
                    self._add(name, record, seen)
            except (CassetteError, OSError) as exc:
                self.problems.append(f"{name}: {exc}")
        self.done = True

    def _add(self, name: str, record: Any, seen: OrderedDict[tuple[int, int], None]) -> None:
        row = self._owner(name, record.id)
        if row is None:
            return
        pieces = []
        for text in _texts(record):
            if not text:
                continue
            key = (row, xxhash.xxh3_64_intdigest(text.encode("utf-8", "replace")))
            if key in seen:
                continue  # this result's earlier request had it: a conversation sent again
            seen[key] = None
            if len(seen) > SEEN:
                seen.popitem(last=False)
            pieces.append(text)
        data = "\n".join(pieces).encode("utf-8", "replace")[:MAX_ENTRY] + b"\x00"
        self._text.write(data)
        self._lowered.write(fold(data))
        self._text.flush()
        self._lowered.flush()
        with self._lock:
            self._starts.append(self._size)
            self._owners.append(row)
            self._size += len(data)
            self.read += 1

    # -- searching ------------------------------------------------------------------------------------------------

    def find(self, query: str) -> tuple[_Found, SearchState]:
        """The rows whose text holds `query` (as far as read and scanned), their snippets, and how far that is."""
        self.start()
        needle = fold(query[:MAX_QUERY].replace("\x00", "").encode())
        t0 = time.perf_counter()
        with self._lock:
            found = self._cache.pop(needle, None) or _Found(bytearray(self._rows))
            self._cache[needle] = found
            while len(self._cache) > 4:
                self._cache.popitem(last=False)
            starts, owners, size, read, done = self._starts, self._owners, self._size, self.read, self.done
            entries = len(starts)
        timed_out = False
        if needle and size and found.scanned_to < entries:
            timed_out = self._scan(needle, found, starts[:entries], owners[:entries], size, t0)
        ms = int(1000 * (time.perf_counter() - t0))
        scanned = found.scanned_to
        complete = done and scanned >= entries and not timed_out
        why = ""
        if not complete:
            why = "the scan reached its time bound" if timed_out else "the text of the cassettes is still being read"
        searched = read if scanned >= entries else scanned
        return found, SearchState(complete=complete, searched=searched, of=self.exchanges, ms=ms, why=why)

    def _scan(self, needle: bytes, found: _Found, starts: array[int], owners: array[int], size: int, t0: float) -> bool:
        maps = _Maps(self._lowered, self._text, size)
        try:
            return _scan_maps(maps, needle, found, starts, owners, t0)
        finally:
            maps.close()


class _Maps:
    """The two files as far as written: lowered (scanned) and as written (snippets).

    The scan uses StringZilla's SIMD substring search (already bench's for redaction) over the same file mapped by
    StringZilla itself: ~10 GB/s here, against ~1.5 GB/s for mmap.find (benchmarks/view_search.py). It maps a file by
    path: the unlinked file's /proc/self/fd entry on Linux; elsewhere mmap.find is used."""

    def __init__(self, lowered: Any, text: Any, size: int) -> None:
        self.low = mmap.mmap(lowered.fileno(), size, access=mmap.ACCESS_READ)
        self.text = mmap.mmap(text.fileno(), size, access=mmap.ACCESS_READ)
        self.size = size
        self._fast: Any = None
        proc = Path(f"/proc/self/fd/{lowered.fileno()}")
        if proc.exists():
            with contextlib.suppress(Exception):  # any failure of the fast path leaves the plain one
                fast = stringzilla.Str(stringzilla.File(str(proc)))
                self._fast = fast if len(fast) >= size else None

    def find(self, needle: bytes, pos: int) -> int:
        if self._fast is not None:
            return int(self._fast.find(needle, pos, self.size))
        return self.low.find(needle, pos, self.size)

    def close(self) -> None:
        self._fast = None  # StringZilla's own map of the file goes with its last reference
        self.low.close()
        self.text.close()


def _scan_maps(maps: _Maps, needle: bytes, found: _Found, starts: array[int], owners: array[int], t0: float) -> bool:
    """Entries from found.scanned_to on: a hit marks its entry's result and the scan goes on at the next entry.
    True when the time bound stopped it."""
    k = found.scanned_to
    pos = starts[k]
    checks = 0
    while True:
        hit = maps.find(needle, pos)
        if hit < 0:
            found.scanned_to = len(starts)
            return False
        k = bisect.bisect_right(starts, hit, lo=k) - 1
        row = owners[k]
        if not found.rows[row]:
            found.rows[row] = 1
            if len(found.snippets) < SNIPPETS:
                end = starts[k + 1] - 1 if k + 1 < len(starts) else maps.size - 1
                found.snippets[row] = _snippet(maps.text, hit, len(needle), starts[k], end)
        k += 1
        found.scanned_to = k
        if k >= len(starts):
            return False
        pos = starts[k]
        checks += 1
        if checks % CHECK_EVERY == 0 and time.perf_counter() - t0 > SCAN_SECONDS:
            return True


def _snippet(text: mmap.mmap, hit: int, length: int, start: int, end: int) -> str:
    """The words around a hit, on one line, from the text as written."""
    lo, hi = max(start, hit - SNIPPET * 2), min(end, hit + length + SNIPPET * 2)
    before = text[lo:hit].decode("utf-8", "replace")[-SNIPPET:]
    match = text[hit : hit + length].decode("utf-8", "replace")
    after = text[hit + length : hi].decode("utf-8", "replace")[: SNIPPET + length]
    line = " ".join(f"{before}{match}{after}".split())
    return ("…" if lo > start else "") + line + ("…" if hi < end else "")


def owners_of(keys: array[int], rows: array[int]) -> Callable[[str, str], int | None]:
    """A lookup from (cassette, exchange id) to its row, over the index's per-exchange hashes (sorted here once)."""
    order = sorted(range(len(keys)), key=keys.__getitem__)
    sorted_keys = array("Q", (keys[i] for i in order))
    sorted_rows = array("i", (rows[i] for i in order))

    def owner(cassette: str, exchange_id: str) -> int | None:
        key = exchange_key(cassette, exchange_id)
        i = bisect.bisect_left(sorted_keys, key)
        return sorted_rows[i] if i < len(sorted_keys) and sorted_keys[i] == key else None

    return owner


def exchange_key(cassette: str, exchange_id: str) -> int:
    return xxhash.xxh3_64_intdigest(f"{cassette}\x00{exchange_id}".encode("utf-8", "replace"))
