"""A load run's levels (`bench load`, docs/load.md), each read from the traffic lines its exchanges were tagged with:
requests, achieved rates, throughput over wall time, latency percentiles, errors by type, goodput and SLO attainment,
pass rate when the catalog was the workload, the generator's send lateness; then the saturation point.

Definitions (vLLM's serving benchmark, docs/report.md): only `measure`-phase exchanges count (warm-up and cool-down
are recorded, counted and said, and left out). A level's wall time runs from its first measured request's start to
its last measured request's end; request throughput is completed requests over it, output and total token
throughput their tokens over it. The sent rate is (n - 1) over the span of the n measured starts. Timing is
bench's everywhere (TTFT, TPOT, ITL pooled, E2EL; bench.scorer.report.latency), goodput vLLM's (slo.py).
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from bench.scorer.report.latency import Dist, Timing, TimingTally, distribution
from bench.scorer.report.slo import good
from bench.scorer.report.stats import wilson
from bench.scorer.report.value_counts import ValueCounts
from bench.scorer.results import ExchangeScore, Result, TrafficLine

# An open-loop level keeps up when the requests completing during its send window come to at least this share of
# the ones sent in it (docs/load.md, "Saturation"); a closed-loop sweep's knee is its first level at this share of
# the highest request throughput.
KEEPS_UP = 0.9
# Send lateness the report warns about (the generator's own, as `bench load` says it live).
LATE_WARN_MS = 10.0


@dataclass
class LevelRow:
    level: int
    load: str  # the level's label, "rate=4.5"
    kind: str  # rate | concurrency | synchronous | throughput | replay
    value: float | None  # its rate, concurrency or speed
    requests: int  # measured exchanges
    warmup: int  # exchanges left out at the start
    cooldown: int  # and at the end
    completed: int
    failed: int
    errors: dict[str, int]  # error type -> measured exchanges that failed so
    wall_s: float | None  # first measured start to last measured end
    sent_per_s: float | None  # (n - 1) / span of the measured starts
    completing_share: float | None  # completions in the send window / requests sent in it (open loop)
    request_throughput: float | None
    output_throughput: float | None
    total_throughput: float | None
    input_tokens: int
    output_tokens: int
    timing: Timing
    lateness_ms: Dist  # send lateness of scheduled arrivals (the generator's)
    good: int  # completed within the SLO
    goodput: float | None  # good requests per second of wall time
    slo_attainment: float | None  # good / requests
    scored: int = 0  # catalog results sent at this level
    passed: int = 0
    pass_rate: float | None = None
    pass_low: float = 0.0
    pass_high: float = 1.0


@dataclass
class Saturation:
    """Where the upstream stopped keeping up (docs/load.md, "Saturation")."""

    basis: str  # "rate": the open-loop levels; "concurrency": the closed-loop levels' knee; "none"
    kept_up: float | None = None  # the highest rate that kept up, or the knee's concurrency
    fell_behind: float | None = None  # the lowest rate that did not
    max_throughput: float | None = None  # the highest request throughput of any level
    max_level: int | None = None
    says: str = ""


@dataclass
class Levels:
    slo: dict[str, float] = field(default_factory=dict)
    rows: list[LevelRow] = field(default_factory=list)
    saturation: Saturation = field(default_factory=lambda: Saturation("none"))
    x_label: str = ""  # what the charts' x axis is: "rate (requests/s)", "concurrency", "sent (requests/s)"
    warnings: list[str] = field(default_factory=list)


def error_type(line: TrafficLine) -> str:
    if line.status is None or line.outcome != "complete":
        return line.outcome if line.outcome != "complete" else "no response"
    if line.status >= 400:
        return f"HTTP {line.status}"
    if "truncated" in line.findings:
        return "truncated"
    if "error_event" in line.findings:
        return "error event"
    return "failed"


def parse_label(label: str) -> tuple[str, float | None]:
    kind, _, value = label.partition("=")
    try:
        number: float | None = float(value)
    except ValueError:
        number = None
    return kind or "?", number


class LevelTally:
    """One level's numbers, a traffic line at a time (memory: the measured starts and ends, the distinct values)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.phases: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.starts, self.ends = array("q"), array("q")  # measured exchanges, wall microseconds
        self.all_ends = array("q")  # every phase: what completes during the send window
        self.completed = self.good = self.input_tokens = self.output_tokens = self.done_output = 0
        self.timing = TimingTally()
        self.late = ValueCounts()
        self.scored = self.passed = 0

    def add(self, line: TrafficLine, slo: Mapping[str, float]) -> None:
        tag = line.load
        assert tag is not None
        self.phases[tag.phase] += 1
        start = line.started or 0
        end = start + (line.end_us or 0)
        self.all_ends.append(end)
        if tag.phase != "measure":
            return
        self.starts.append(start)
        self.ends.append(end)
        if tag.late_us is not None:
            self.late.add(tag.late_us)
        if line.failed:
            self.errors[error_type(line)] += 1
        else:
            self.completed += 1
            self.good += good(line, slo)
            self.done_output += line.output_tokens or 0
        self.input_tokens += line.input_tokens or 0
        self.output_tokens += line.output_tokens or 0
        self.timing.add(
            ExchangeScore(
                ttft_us=line.ttft_us, e2el_us=line.e2el_us, tpot_us=line.tpot_us, itl_us=line.itl_us,
                output_tokens=line.output_tokens, tokens_source=line.tokens_source,
            )
        )  # fmt: skip

    def finish(self, level: int, slo: Mapping[str, float]) -> LevelRow:
        kind, value = parse_label(self.label)
        n = len(self.starts)
        starts = np.frombuffer(self.starts, dtype=np.int64)
        ends = np.frombuffer(self.ends, dtype=np.int64)
        wall = float(ends.max() - starts.min()) / 1e6 if n else None
        span = float(starts.max() - starts.min()) / 1e6 if n > 1 else 0.0
        sent = (n - 1) / span if span > 0 else None
        completing = None
        if kind in ("rate", "replay") and span > 0:
            all_ends = np.frombuffer(self.all_ends, dtype=np.int64)
            inside = int(((all_ends >= starts.min()) & (all_ends <= starts.max())).sum())
            completing = inside / (n - 1)
        per_s = (lambda x: x / wall) if wall else (lambda x: None)
        good_n = self.good if slo else self.completed
        return LevelRow(
            level=level, load=self.label, kind=kind, value=value, requests=n,
            warmup=self.phases["warmup"], cooldown=self.phases["cooldown"], completed=self.completed,
            failed=n - self.completed, errors=dict(self.errors.most_common()), wall_s=wall, sent_per_s=sent,
            completing_share=completing, request_throughput=per_s(self.completed),
            output_throughput=per_s(self.done_output),
            total_throughput=per_s(self.done_output + self.input_tokens),
            input_tokens=self.input_tokens, output_tokens=self.output_tokens, timing=self.timing.finish(),
            lateness_ms=distribution(self.late), good=good_n, goodput=per_s(good_n),
            slo_attainment=good_n / n if n else None,
        )  # fmt: skip


class LevelsTally:
    """Every level of the load runs in a scores file, a line at a time."""

    def __init__(self, slo: Mapping[str, float]) -> None:
        self.slo = dict(slo)
        self.levels: dict[int, LevelTally] = {}
        self.labels: dict[int, set[str]] = {}
        self.results: dict[int, list[int]] = {}

    def traffic_line(self, line: TrafficLine) -> None:
        tag = line.load
        if tag is None:
            return
        tally = self.levels.get(tag.level)
        if tally is None:
            tally = self.levels[tag.level] = LevelTally(tag.load)
        self.labels.setdefault(tag.level, set()).add(tag.load)
        tally.add(line, self.slo)

    def result(self, result: Result) -> None:
        if result.level is None or result.status != "scored":
            return
        cell = self.results.setdefault(result.level, [0, 0])
        cell[0] += 1
        cell[1] += bool(result.passed)

    def finish(self) -> Levels | None:
        if not self.levels:
            return None
        out = Levels(slo=self.slo)
        for level in sorted(self.levels):
            row = self.levels[level].finish(level, self.slo)
            scored, passed = self.results.get(level, [0, 0])
            if scored:
                row.scored, row.passed, row.pass_rate = scored, passed, passed / scored
                row.pass_low, row.pass_high = wilson(passed, scored)
            out.rows.append(row)
            if len(self.labels[level]) > 1:
                out.warnings.append(
                    f"load level {level} holds exchanges of several loads ({', '.join(sorted(self.labels[level]))}): "
                    "several load runs in one report; report each run's cassette on its own"
                )
            late = row.lateness_ms
            if late.count and late.p99 is not None and late.p99 > LATE_WARN_MS:
                out.warnings.append(
                    f"load level {level} ({row.load}): the generator sent arrivals up to {late.p99:.1f} ms late "
                    f"(p99): its figures measure the generator as well as the upstream"
                )
        out.x_label = x_label(out.rows)
        out.saturation = saturation(out.rows)
        return out


def x_label(rows: list[LevelRow]) -> str:
    kinds = {r.kind for r in rows}
    if kinds <= {"rate"}:
        return "rate (requests/s asked)"
    if kinds <= {"concurrency", "synchronous", "throughput"}:
        return "concurrency (requests in flight)"
    return "sent (requests/s; hollow: the closed-loop levels)"


def x_value(row: LevelRow, label: str) -> float | None:
    """Where a level sits on the charts' x axis."""
    if label.startswith("rate") or label.startswith("concurrency"):
        return row.value
    return row.sent_per_s if row.sent_per_s is not None else row.request_throughput


def saturation(rows: list[LevelRow]) -> Saturation:
    best = max((r for r in rows if r.request_throughput), key=lambda r: r.request_throughput or 0.0, default=None)
    top = best.request_throughput if best is not None else None
    out = Saturation("none", max_throughput=top, max_level=best.level if best is not None else None)
    open_rows = sorted((r for r in rows if r.kind == "rate" and r.completing_share is not None), key=_by_value)
    if open_rows:
        out.basis = "rate"
        for row in open_rows:
            if (row.completing_share or 0.0) >= KEEPS_UP:
                out.kept_up = row.value
            elif out.fell_behind is None:
                out.fell_behind = row.value
        out.says = _says_rate(out)
        return out
    closed = sorted((r for r in rows if r.kind in ("concurrency", "synchronous", "throughput")), key=_by_value)
    if closed and top:
        out.basis = "concurrency"
        knee = next(r for r in closed if (r.request_throughput or 0.0) >= KEEPS_UP * top)
        out.kept_up = knee.value
        out.says = (
            f"throughput reaches {100 * KEEPS_UP:.0f}% of its highest ({top:.2f} req/s) at concurrency "
            f"{knee.value:g} (level {knee.level}): more in flight adds latency, not throughput"
        )
    return out


def _by_value(row: LevelRow) -> float:
    return row.value if row.value is not None else 0.0


def _says_rate(s: Saturation) -> str:
    top = f"; the highest request throughput was {s.max_throughput:.2f} req/s" if s.max_throughput else ""
    if s.fell_behind is None:
        return f"kept up at every rate asked (up to {s.kept_up:g} req/s){top}"
    if s.kept_up is None:
        return f"fell behind already at {s.fell_behind:g} req/s, the lowest rate asked{top}"
    return f"saturates between {s.kept_up:g} req/s (kept up) and {s.fell_behind:g} req/s (fell behind){top}"
