"""The traffic section's numbers: every recorded exchange, tagged or not, per endpoint x requested model x served
model x client (User-Agent family), from the scores file's traffic lines (bench.scorer.traffic_lines).

Timing uses the same definitions and percentiles as the per-model timing (bench.scorer.report.latency), per API as
docs/report.md states; tokens come from usage, and output tokens are counted from the stream when a response had no
usage (such rows are marked). A system fingerprint that changes between consecutive requests of one requested model
(in the order they started) is listed with the time it changed.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

import numpy as np

from bench.scorer.report.latency import Timing, TimingTally
from bench.scorer.results import ExchangeScore, TrafficLine

NO_VALUE = "–"


@dataclass
class FingerprintChange:
    model: str
    at: str  # ISO 8601 UTC of the first request that saw the new fingerprint
    exchange: str  # cassette#id of that request
    before: str
    after: str


@dataclass
class TrafficRow:
    endpoint: str
    model: str
    served_model: str
    client: str
    requests: int
    statuses: dict[str, int]
    outcomes: dict[str, int]
    failed: int
    error_rate: float
    input_tokens: int
    input_reported: int  # requests whose usage gave their input tokens
    input_counted: int  # requests whose input tokens were counted from the request text (no usage)
    cached_input_tokens: int
    output_tokens: int
    output_counted: int  # requests whose output tokens were counted from the stream (no usage)
    timing: Timing
    fingerprints: list[str]
    unknown_events: dict[str, int] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.endpoint} · {self.model} · {self.client}"


@dataclass
class SessionRow:
    session: str
    exchanges: int
    models: list[str]
    links: dict[str, int]  # how its later exchanges were linked (bench.scorer.sessions)


@dataclass
class Sessions:
    """Agent sessions of more than one exchange (bench.scorer.sessions), and the longest of them."""

    sessions: int = 0
    exchanges: int = 0
    longest: list[SessionRow] = field(default_factory=list)
    links: dict[str, int] = field(default_factory=dict)


@dataclass
class Traffic:
    rows: list[TrafficRow] = field(default_factory=list)
    fingerprint_changes: list[FingerprintChange] = field(default_factory=list)
    exchanges: int = 0
    untagged: int = 0
    sessions: Sessions = field(default_factory=Sessions)


def _iso(started_us: Any) -> str:
    if not isinstance(started_us, int):
        return NO_VALUE
    return datetime.fromtimestamp(started_us / 1e6, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class RowTally:
    """One traffic row's numbers, gathered one traffic line at a time."""

    def __init__(self) -> None:
        self.requests = self.failed = 0
        self.statuses: Counter[str] = Counter()
        self.outcomes: Counter[str] = Counter()
        self.unknown: Counter[str] = Counter()
        self.input_tokens = self.input_reported = self.input_counted = 0
        self.cached_input_tokens = self.output_tokens = self.output_counted = 0
        self.fingerprints: dict[str, None] = {}
        self.timing = TimingTally()

    def add(self, e: TrafficLine) -> None:
        self.requests += 1
        self.statuses["none" if e.status is None else str(e.status)] += 1
        self.outcomes[e.outcome] += 1
        self.failed += 1 if e.failed else 0
        self.unknown.update(e.unknown_events)
        if e.input_tokens is not None:
            self.input_tokens += e.input_tokens
            self.input_reported += e.input_tokens_source == "usage"
        self.input_counted += e.input_tokens_source == "counted"
        if e.cached_input_tokens is not None:
            self.cached_input_tokens += e.cached_input_tokens
        if e.output_tokens is not None:
            self.output_tokens += e.output_tokens
        self.output_counted += e.tokens_source == "counted"
        if e.system_fingerprint:
            self.fingerprints.setdefault(e.system_fingerprint, None)
        self.timing.add(
            ExchangeScore(
                ttft_us=e.ttft_us,
                e2el_us=e.e2el_us,
                tpot_us=e.tpot_us,
                itl_us=e.itl_us,
                output_tokens=e.output_tokens,
                tokens_source=e.tokens_source,
            )
        )

    def finish(self, key: tuple[str, str, str, str]) -> TrafficRow:
        endpoint, model, served, client = key
        return TrafficRow(
            endpoint=endpoint,
            model=model,
            served_model=served,
            client=client,
            requests=self.requests,
            statuses=dict(sorted(self.statuses.items())),
            outcomes=dict(sorted(self.outcomes.items())),
            failed=self.failed,
            error_rate=self.failed / self.requests,
            input_tokens=self.input_tokens,
            input_reported=self.input_reported,
            input_counted=self.input_counted,
            cached_input_tokens=self.cached_input_tokens,
            output_tokens=self.output_tokens,
            output_counted=self.output_counted,
            timing=self.timing.finish(),
            fingerprints=list(self.fingerprints),
            unknown_events=dict(sorted(self.unknown.items())),
        )


class Stamped:
    """One model's fingerprinted requests, in compact columns (about 30 bytes and the id's length each): their start
    time, cassette and fingerprint (as numbers standing for shared strings), and ids packed end to end."""

    NONE = -(1 << 63)  # a request without a start time

    def __init__(self) -> None:
        self.started = array("q")
        self.cassettes = array("i")
        self.fingerprints = array("i")
        self.id_ends = array("q")
        self.ids = bytearray()

    def add(self, started: Any, cassette: int, fingerprint: int, ident: str) -> None:
        self.started.append(started if isinstance(started, int) and started != self.NONE else self.NONE)
        self.cassettes.append(cassette)
        self.fingerprints.append(fingerprint)
        self.ids += ident.encode("utf-8", "surrogatepass")
        self.id_ends.append(len(self.ids))

    def ident(self, i: int) -> str:
        start = self.id_ends[i - 1] if i else 0
        return self.ids[start : self.id_ends[i]].decode("utf-8", "surrogatepass")

    def order(self, cassette_rank: list[int]) -> list[int]:
        """Indices in the order (started or 0, cassette or "", id), equal ones in the order they came."""
        started = np.frombuffer(self.started, dtype=np.int64)
        when = np.where(started == self.NONE, 0, started)
        where = np.asarray(cassette_rank, dtype=np.int64)[np.frombuffer(self.cassettes, dtype=np.int32)]
        order = np.lexsort((where, when)).tolist()  # stable: equal keys keep their order
        out: list[int] = []
        i = 0
        while i < len(order):
            j = i + 1
            while j < len(order) and when[order[j]] == when[order[i]] and where[order[j]] == where[order[i]]:
                j += 1
            tied = order[i:j]
            out.extend(sorted(tied, key=self.ident) if len(tied) > 1 else tied)
            i = j
        return out


class SessionTally:
    """Sessions counted from their linked exchanges (a session's first exchange is linked to nothing): memory bounded
    by the sessions of more than one exchange."""

    LONGEST = 10

    def __init__(self) -> None:
        self.linked: dict[str, Counter[str]] = {}
        self.models: dict[str, set[str]] = {}

    def add(self, e: TrafficLine) -> None:
        if e.session is None or e.session_link is None:
            return
        self.linked.setdefault(e.session, Counter())[e.session_link] += 1
        if e.model:
            self.models.setdefault(e.session, set()).add(e.model)

    def finish(self) -> Sessions:
        links: Counter[str] = Counter()
        for counts in self.linked.values():
            links.update(counts)
        ranked = sorted(self.linked, key=lambda s: (-sum(self.linked[s].values()), s))[: self.LONGEST]
        longest = [
            SessionRow(
                s,
                sum(self.linked[s].values()) + 1,
                sorted(self.models.get(s, ())),
                dict(sorted(self.linked[s].items())),
            )
            for s in ranked
        ]
        total = sum(links.values()) + len(self.linked)
        return Sessions(len(self.linked), total, longest, dict(sorted(links.items())))


class TrafficTally:
    """The traffic section built one traffic line at a time: memory bounded by the rows and the distinct timing
    values, except for the fingerprint changes, which need every request that carried a fingerprint in start order
    (kept in compact columns, see Stamped)."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str, str, str], RowTally] = {}
        self.exchanges = self.untagged = 0
        self.stamped: dict[str, Stamped] = {}
        self._cassettes: dict[Any, int] = {}
        self._fingerprints: dict[Any, int] = {}
        self.sessions = SessionTally()

    def add(self, e: TrafficLine) -> None:
        self.sessions.add(e)
        key = (e.endpoint or NO_VALUE, e.model or NO_VALUE, e.served_model or NO_VALUE, e.client or NO_VALUE)
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = RowTally()
        row.add(e)
        fingerprint = e.system_fingerprint
        if fingerprint:
            model = e.model or NO_VALUE
            stamped = self.stamped.get(model)
            if stamped is None:
                stamped = self.stamped[model] = Stamped()
            stamped.add(
                e.started,
                self._cassettes.setdefault(e.cassette, len(self._cassettes)),
                self._fingerprints.setdefault(fingerprint, len(self._fingerprints)),
                e.id,
            )
        self.exchanges += 1
        self.untagged += not e.test

    def finish(self) -> Traffic:
        return Traffic(
            rows=[self.rows[key].finish(key) for key in sorted(self.rows)],
            fingerprint_changes=self._changes(),
            exchanges=self.exchanges,
            untagged=self.untagged,
            sessions=self.sessions.finish(),
        )

    def _changes(self) -> list[FingerprintChange]:
        cassettes = list(self._cassettes)
        fingerprints = list(self._fingerprints)
        names = {name: r for r, name in enumerate(sorted({c or "" for c in cassettes}))}
        rank = [names[c or ""] for c in cassettes]  # None and "" sort as one
        out: list[FingerprintChange] = []
        for model in sorted(self.stamped):
            stamped = self.stamped[model]
            for prev, cur in pairwise(stamped.order(rank)):
                before, after = stamped.fingerprints[prev], stamped.fingerprints[cur]
                if before != after:
                    started = stamped.started[cur]
                    out.append(
                        FingerprintChange(
                            model=model,
                            at=_iso(None if started == Stamped.NONE else started),
                            exchange=f"{cassettes[stamped.cassettes[cur]]}#{stamped.ident(cur)}",
                            before=str(fingerprints[before]),
                            after=str(fingerprints[after]),
                        )
                    )
        return out


def traffic(entries: Iterable[TrafficLine]) -> Traffic:
    tally = TrafficTally()
    for e in entries:
        tally.add(e)
    return tally.finish()
