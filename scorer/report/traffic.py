"""The traffic section's numbers: every recorded exchange, tagged or not, per endpoint x requested model x served
model x client (User-Agent family), from the scores file's traffic lines (scorer.traffic_lines).

Timing uses the same definitions and percentiles as the per-model timing (scorer.report.latency), per API as
docs/report.md states; tokens come from usage, and output tokens are counted from the stream when a response had no
usage (such rows are marked). A system fingerprint that changes between consecutive requests of one requested model
(in the order they started) is listed with the time it changed.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

from scorer.report.latency import Timing, exchange_timing
from scorer.results import ExchangeScore

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
class Traffic:
    rows: list[TrafficRow] = field(default_factory=list)
    fingerprint_changes: list[FingerprintChange] = field(default_factory=list)
    exchanges: int = 0
    untagged: int = 0


def _iso(started_us: Any) -> str:
    if not isinstance(started_us, int):
        return NO_VALUE
    return datetime.fromtimestamp(started_us / 1e6, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _row(key: tuple[str, str, str, str], entries: list[Mapping[str, Any]]) -> TrafficRow:
    endpoint, model, served, client = key
    statuses = Counter("none" if e.get("status") is None else str(e["status"]) for e in entries)
    outcomes = Counter(str(e.get("outcome")) for e in entries)
    failed = sum(1 for e in entries if e.get("failed"))
    unknown: Counter[str] = Counter()
    for e in entries:
        unknown.update(e.get("unknown_events") or {})
    inputs = [e["input_tokens"] for e in entries if isinstance(e.get("input_tokens"), int)]
    cached = [e["cached_input_tokens"] for e in entries if isinstance(e.get("cached_input_tokens"), int)]
    outputs = [e["output_tokens"] for e in entries if isinstance(e.get("output_tokens"), int)]
    fingerprints = list(dict.fromkeys(str(e["system_fingerprint"]) for e in entries if e.get("system_fingerprint")))
    return TrafficRow(
        endpoint=endpoint,
        model=model,
        served_model=served,
        client=client,
        requests=len(entries),
        statuses=dict(sorted(statuses.items())),
        outcomes=dict(sorted(outcomes.items())),
        failed=failed,
        error_rate=failed / len(entries),
        input_tokens=sum(inputs),
        input_reported=sum(
            1
            for e in entries
            if e.get("input_tokens_source", "usage") == "usage" and isinstance(e.get("input_tokens"), int)
        ),
        input_counted=sum(1 for e in entries if e.get("input_tokens_source") == "counted"),
        cached_input_tokens=sum(cached),
        output_tokens=sum(outputs),
        output_counted=sum(1 for e in entries if e.get("tokens_source") == "counted"),
        timing=exchange_timing(
            ExchangeScore(
                ttft_us=e.get("ttft_us"),
                e2el_us=e.get("e2el_us"),
                tpot_us=e.get("tpot_us"),
                itl_us=e.get("itl_us"),
                output_tokens=e.get("output_tokens"),
                tokens_source=e.get("tokens_source"),
            )
            for e in entries
        ),
        fingerprints=fingerprints,
        unknown_events=dict(sorted(unknown.items())),
    )


def _changes(entries: Iterable[Mapping[str, Any]]) -> list[FingerprintChange]:
    by_model: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for e in entries:
        if e.get("system_fingerprint"):
            by_model[str(e.get("model") or NO_VALUE)].append(e)
    out: list[FingerprintChange] = []
    for model in sorted(by_model):
        seen = sorted(by_model[model], key=lambda e: (e.get("started") or 0, e.get("cassette") or "", e["id"]))
        for prev, cur in pairwise(seen):
            if prev["system_fingerprint"] != cur["system_fingerprint"]:
                out.append(
                    FingerprintChange(
                        model=model,
                        at=_iso(cur.get("started")),
                        exchange=f"{cur.get('cassette')}#{cur['id']}",
                        before=str(prev["system_fingerprint"]),
                        after=str(cur["system_fingerprint"]),
                    )
                )
    return out


def traffic(entries: list[dict[str, Any]]) -> Traffic:
    groups: dict[tuple[str, str, str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for e in entries:
        key = (
            str(e.get("endpoint") or NO_VALUE),
            str(e.get("model") or NO_VALUE),
            str(e.get("served_model") or NO_VALUE),
            str(e.get("client") or NO_VALUE),
        )
        groups[key].append(e)
    return Traffic(
        rows=[_row(key, groups[key]) for key in sorted(groups)],
        fingerprint_changes=_changes(entries),
        exchanges=len(entries),
        untagged=sum(1 for e in entries if not e.get("test")),
    )
