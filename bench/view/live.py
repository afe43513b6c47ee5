"""`bench view --follow DIR`: the exchanges of every cassette under DIR as they are recorded, the way mitmweb shows
flows, with rates and errors as they change.

Each cassette is followed by a CassetteTail (bench.core.cassette.tail: read-only, from the last frame it had not read
whole); the folder is listed again at every poll, so the cassettes a proxy or `bench record` starts later are
followed too. An exchange becomes a Flow: the few figures the live table shows, parsed once. The last MAX_FLOWS are
kept (and counted in full); opening one reads its record again through the cassette's seek index.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import deque
from pathlib import Path

import msgspec

from bench.core.cassette.format import SUFFIX
from bench.core.cassette.records import Exchange
from bench.core.cassette.seek import SeekIndex
from bench.core.cassette.tail import CassetteTail
from bench.core.errors import CassetteError
from bench.core.parse import parse_exchange
from bench.core.usage import usage_tokens

MAX_FLOWS = 5000  # flows kept to show; older ones are counted, not kept
WINDOW_S = 10.0  # rates are over the exchanges that ended in the last WINDOW_S seconds
RECENT = 100  # latency medians are over the last RECENT exchanges
MAX_PROBLEMS = 50


class Flow(msgspec.Struct):
    seq: int  # the order the view read it in, from 1
    cassette: str  # its path under the followed folder
    id: str
    started_us: int  # wall clock at the request (microseconds since the epoch)
    seen_us: int  # wall clock when the view read it from the file
    method: str
    path: str
    endpoint: str
    model: str | None
    test: str | None  # the X-Bench-Test tag
    status: int | None
    outcome: str
    ttft_us: int | None
    e2el_us: int | None
    end_us: int  # the response read whole, after started_us
    input_tokens: int | None
    output_tokens: int | None
    error: str | None
    failed: bool  # no status, a status of 400 or more, or an outcome other than complete
    replayed: bool


class Stats(msgspec.Struct):
    folder: str
    cassettes: int
    recording: int  # cassettes without an end record yet
    flows: int  # exchanges read since the view started following
    failed: int
    per_s: float  # exchanges that ended in the last WINDOW_S seconds, per second
    output_tokens_per_s: float
    ttft_p50_ms: float | None  # over the last RECENT exchanges
    e2el_p50_ms: float | None
    problems: list[str]


def _flow(seq: int, cassette: str, record: Exchange) -> Flow:
    parsed = parse_exchange(record)
    body = parsed.request_json or {}
    tokens = usage_tokens(parsed.usage)
    failed = not parsed.ok
    model = body.get("model")
    return Flow(
        seq=seq,
        cassette=cassette,
        id=record.id,
        started_us=record.started,
        seen_us=time.time_ns() // 1000,
        method=record.request.method,
        path=record.request.path[:300],
        endpoint=parsed.endpoint,
        model=str(model)[:200] if model is not None else parsed.model,
        test=record.tags.get("test"),
        status=parsed.status,
        outcome=parsed.outcome,
        ttft_us=parsed.timing.ttft_us,
        e2el_us=parsed.timing.e2el_us,
        end_us=record.timing.end,
        input_tokens=tokens.input,
        output_tokens=tokens.output if tokens.output is not None else parsed.timing.output_tokens,
        error=(parsed.error or record.error or None) if failed else None,
        failed=failed,
        replayed=record.replay_of is not None,
    )


class Live:
    """The followed folder: `poll` (from a worker thread) reads what was written; `after` answers the page."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._tails: dict[Path, CassetteTail] = {}
        self._flows: deque[Flow] = deque(maxlen=MAX_FLOWS)
        self._lock = threading.Lock()
        self.count = 0
        self.failed = 0
        self._problems: deque[str] = deque(maxlen=MAX_PROBLEMS)
        self._seek: dict[Path, SeekIndex] = {}

    def poll(self) -> int:
        """Read every cassette's new exchanges; how many there were."""
        new = 0
        for path in sorted(self.folder.rglob(f"*{SUFFIX}")):
            tail = self._tails.get(path)
            if tail is None:
                tail = self._tails[path] = CassetteTail(path, frames_at_once=4)
            try:
                records = tail.poll()
            except CassetteError as exc:
                if not self._problems or self._problems[-1] != str(exc):
                    self._problems.append(str(exc))
                continue
            name = str(path.relative_to(self.folder))
            flows = [_flow(self.count + i, name, record) for i, record in enumerate(records, 1)]
            new += len(flows)
            with self._lock:
                self._flows.extend(flows)
                self.count += len(flows)
                self.failed += sum(f.failed for f in flows)
                for problem in tail.problems:
                    self._problems.append(problem)
                tail.problems.clear()
        return new

    def after(self, seq: int, limit: int = 500) -> tuple[list[Flow], Stats]:
        """The flows read after `seq` (the last `limit` of them), oldest first, and the figures now."""
        with self._lock:
            flows = [f for f in self._flows if f.seq > seq][-limit:]
            return flows, self._stats()

    def record(self, cassette: str, exchange_id: str) -> Exchange | None:
        """A flow's exchange, read again from its cassette through a seek index (None: no such flow here). Only the
        followed cassettes are read: a name from the URL never reaches another file."""
        path = self.folder / cassette
        if path not in self._tails:
            return None
        with self._lock:
            seek = self._seek.get(path)
            if seek is None:
                seek = self._seek[path] = SeekIndex(path)
        return seek.read([exchange_id]).get(exchange_id)

    def _stats(self) -> Stats:
        now = time.time_ns() // 1000
        recent = [f for f in self._flows if now - (f.started_us + f.end_us) <= WINDOW_S * 1e6]
        last = list(self._flows)[-RECENT:]
        ttft = [f.ttft_us / 1000 for f in last if f.ttft_us is not None]
        e2el = [f.e2el_us / 1000 for f in last if f.e2el_us is not None]
        return Stats(
            folder=str(self.folder),
            cassettes=len(self._tails),
            recording=sum(t.end is None for t in self._tails.values()),
            flows=self.count,
            failed=self.failed,
            per_s=len(recent) / WINDOW_S,
            output_tokens_per_s=sum(f.output_tokens or 0 for f in recent) / WINDOW_S,
            ttft_p50_ms=statistics.median(ttft) if ttft else None,
            e2el_p50_ms=statistics.median(e2el) if e2el else None,
            problems=list(self._problems),
        )
