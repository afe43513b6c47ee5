"""Serving recorded exchanges: the index by fingerprint, the nearest recorded request on a miss, and pacing.

Identical requests are served in recorded order. In `replay` mode a fingerprint whose recordings are used up starts
again from the first (a rerun that asks more often than the recording did still gets answers); in `auto` mode a
used-up fingerprint is a miss, so the extra request is forwarded and recorded.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from pathlib import Path
from typing import Any

import msgspec
import zstandard

from bench.core.cassette import CassetteReader, find_cassettes
from bench.core.cassette.format import CLIENT_DISCONNECTED
from bench.core.cassette.records import Exchange, Request, Response, encode
from bench.core.cassette.seek import SeekIndex
from bench.core.errors import BenchError, CassetteError
from bench.core.fingerprint import canonical_body, canonical_query
from bench.proxy.cursors import Cursors, LocalCursors, SharedCursors
from bench.proxy.matching import MatchOptions

STRICT = MatchOptions()

MAX_LISTED_DIFFERENCES = 8
log = logging.getLogger("bench.proxy")


def parse_pace(pace: str) -> float:
    """Factor applied to recorded delays: realtime 1.0, instant 0.0, xN 1/N."""
    text = pace.strip().lower()
    if text == "realtime":
        return 1.0
    if text == "instant":
        return 0.0
    if text.startswith("x"):
        try:
            speed = float(text[1:])
        except ValueError:
            speed = 0.0
        if speed > 0 and speed != float("inf"):
            return 1.0 / speed
    raise BenchError(f"bad pace {pace!r}; use realtime, instant or xN (x2 replays twice as fast)")


# Level 1: a record compresses 9x alone (its chunks repeat one envelope) and this runs once per record at start.
_PACK = zstandard.ZstdCompressor(level=1)
_UNPACK = zstandard.ZstdDecompressor()
_DECODER = msgspec.msgpack.Decoder(Exchange)


class Recorded:
    """One replayable exchange, held compressed: the index of a folder of recordings holds 8x less than its unpacked
    records would (the shipped cassette, benchmarks/replay_memory.py), and a hit unpacks the record it serves in
    ~25 us."""

    __slots__ = ("_packed", "cassette", "id", "request", "seeker", "started")

    def __init__(self, cassette: str, record: Exchange, seeker: SeekIndex | None = None) -> None:
        self.cassette = cassette
        # A large answer's record is held without the reads of its `response.parts`: `seeker` reads those from its file
        # as they are served (bench.proxy.replay_body), so that neither the index nor a replay holds the whole body.
        self.seeker = seeker
        self.id = record.id or "?"
        self.started = record.started
        # What matching and a miss's comparison read stays unpacked; the rest (headers, the response) is packed.
        req = record.request
        self.request = Request(method=req.method, path=req.path, query=req.query, body=req.body, fp=req.fp)
        # Copied: python-zstandard returns bytes that keep the allocation of the worst-case size (16 KiB for 1 KiB).
        self._packed = bytes(memoryview(_PACK.compress(encode(record))))

    @property
    def record(self) -> Exchange:
        """The record, unpacked anew for each use (the caller may keep it); a large answer's `response.parts` are
        left to be read through `seeker`."""
        return _DECODER.decode(_UNPACK.decompress(self._packed))


def replayable(record: Exchange) -> bool:
    """A response started (status known) and the client did not cut it short; what a replay session wrote (its
    replays and its misses) is not re-indexed."""
    response = record.response
    return (
        response.status is not None
        and (record.outcome != CLIENT_DISCONNECTED or whole_stream(response))
        and record.replay_of is None
        and record.mode != "replay"
        and bool(record.request.fp)
    )


def whole_stream(response: Response) -> bool:
    """A stream whose client left only after its `data: [DONE]`: the client had the whole answer. The openai SDK
    closes its response at `[DONE]`, often before the proxy has read the upstream's end of body (the chunked
    encoding's last, empty chunk), so such an exchange is recorded as `client_disconnected` while it replays whole."""
    return response.streamed and sent_done(response.chunks)


def sent_done(chunks: list[bytes]) -> bool:
    """The stream's last reads carry its `data: [DONE]` (an event can be split across two reads)."""
    return bool(chunks) and b"data: [DONE]" in b"".join(chunks[-2:])


class ReplayIndex:
    def __init__(self, recorded: list[Recorded], match: MatchOptions = STRICT) -> None:
        self.all = sorted(recorded, key=lambda r: r.started)
        self.match = match
        self.by_fp: dict[str, list[Recorded]] = defaultdict(list)
        for item in self.all:
            request = item.request
            body = request.body
            key = match.key(request.method, request.path, request.query, body, request.fp)
            self.by_fp[match_key(key, body)].append(item)
        # Where each key stands; `share()` makes them shared by the worker processes forked after it.
        self.cursors: Cursors = LocalCursors()
        self.files = len({r.cassette for r in recorded})

    def share(self) -> None:
        """Keep the cursors where worker processes forked from now on all claim from (bench.proxy.cursors)."""
        self.cursors = SharedCursors(self.by_fp)

    def key_for(self, method: str, path: str, query: str, body: bytes, fp: str) -> str:
        """The key a live request is looked up by, normalised as the recordings were (the match options)."""
        return match_key(self.match.key(method, path, query, body, fp), body)

    @classmethod
    def load(cls, directory: Path, match: MatchOptions = STRICT) -> ReplayIndex:
        if not directory.exists():
            return cls([], match)
        items: list[Recorded] = []
        for path in find_cassettes([directory]):
            # A bad, 0-byte or damaged file costs only what it cannot give: replay serves the rest, and says so.
            try:
                reader = CassetteReader(path, part_bodies=False)
            except CassetteError as exc:
                log.warning("bench proxy: warning: %s; not replayed", exc)
                continue
            seeker: SeekIndex | None = None
            for record in reader:
                if not replayable(record):
                    continue
                if record.response.parts and seeker is None:
                    seeker = SeekIndex(path)  # one per file, shared by its large answers
                items.append(Recorded(path.name, record, seeker if record.response.parts else None))
            if reader.damaged:
                log.warning("bench proxy: warning: %s; replaying what was read", reader.problem)
        return cls(items, match)

    def __len__(self) -> int:
        return len(self.all)

    def take(self, key: str, *, wrap: bool) -> Recorded | None:
        """The next recording for a `match_key`, or None (unknown, or used up and not wrapping)."""
        items = self.by_fp.get(key)
        if not items:
            return None
        i = self.cursors.claim(key, len(items), wrap=wrap)
        return None if i is None else items[i]

    def unused(self) -> list[Recorded]:
        """The recordings no request has taken yet, in recorded order."""
        left: list[Recorded] = []
        for key, items in self.by_fp.items():
            left.extend(items[self.cursors.position(key) :])
        return sorted(left, key=lambda r: r.started)

    def nearest(self, method: str, path: str, query: str, body: bytes) -> tuple[Recorded, list[str]] | None:
        """The recorded request closest to this one, and the fields where they differ."""
        want = _comparable(method, path, query, body)
        best: tuple[int, Recorded, list[str]] | None = None
        for item in self.all:
            req = item.request
            have = _comparable(req.method, req.path, req.query, req.body)
            diffs: list[str] = []
            _diff(want, have, "", diffs)
            score = len(diffs) + 100 * (want["method"] != have["method"]) + 100 * (want["path"] != have["path"])
            if best is None or score < best[0]:
                best = (score, item, diffs)
        return None if best is None else (best[1], best[2])


def streams(body: bytes) -> bool:
    """Whether the request asks for a stream; cheap for bodies that do not mention it."""
    if b'"stream"' not in body:
        return False
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):  # nested absurdly deep: not a request to answer
        return False
    return isinstance(doc, dict) and bool(doc.get("stream"))


def match_key(fp: str, body: bytes) -> str:
    """The fingerprint, plus whether a stream was asked for: `stream` is volatile for the fingerprint (the same
    question), but a client that asked for JSON cannot be served an SSE stream, nor the other way round."""
    return f"{fp}/stream" if streams(body) else fp


def _comparable(method: str, path: str, query: str, body: bytes) -> dict[str, Any]:
    canon = canonical_body(body)
    return {
        "stream": streams(body),
        "method": method.upper(),
        "path": path.rstrip("/") or "/",
        "query": dict(canonical_query(query)),
        "body": canon if canon is not None else body,
    }


def _diff(a: Any, b: Any, where: str, out: list[str]) -> None:
    """Paths (`body.messages[1].content`) where two JSON-like values differ, deepest first difference only."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            sub = f"{where}.{key}" if where else str(key)
            if key not in a or key not in b:
                out.append(sub)
            else:
                _diff(a[key], b[key], sub, out)
        return
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{where} (length {len(a)} vs {len(b)})")
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            _diff(x, y, f"{where}[{i}]", out)
        return
    if a != b or type(a) is not type(b):
        out.append(where)


def describe_miss(
    method: str,
    path: str,
    fp: str,
    nearest: tuple[Recorded, list[str]] | None,
    hint: str = "record it with --mode auto or fix the request",
) -> str:
    head = f"bench replay: no recorded exchange matches {method} {path} ({fp})"
    if nearest is None:
        return f"{head}; the cassettes hold no exchanges: record first with --mode record or auto"
    item, diffs = nearest
    req = item.request
    shown = ", ".join(diffs[:MAX_LISTED_DIFFERENCES]) or "nothing visible (a used-up identical request)"
    if len(diffs) > MAX_LISTED_DIFFERENCES:
        shown += f" and {len(diffs) - MAX_LISTED_DIFFERENCES} more"
    return (
        f"{head}; nearest recorded: {item.id} in {item.cassette} ({req.method} {req.path}), "
        f"which differs in: {shown}; {hint}"
    )
