"""Turn scored results into the numbers a report shows: pass rates, epochs, failures, reliability, settings, timing.

Every renderer (table, markdown, JSON, HTML) draws from the one `Report` built here, so they cannot disagree.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import orjson

from bench.scorer.caveats import MAX_TOKENS, NO_FINISH, REPLAYED, CaveatTally, result_flags
from bench.scorer.failures import EVALUATOR_ERROR
from bench.scorer.report.cost import Cost, CostTally, Prices
from bench.scorer.report.failed_tests import FailedTally, FailedTests
from bench.scorer.report.latency import Timing, TimingTally, distribution, task_seconds
from bench.scorer.report.levels import Levels, LevelsTally
from bench.scorer.report.load import Scores, Stream, paused_gc
from bench.scorer.report.stats import pass_at_k, pass_hat_k, wilson
from bench.scorer.report.traffic import Traffic, TrafficTally
from bench.scorer.report.value_counts import ValueCounts, median
from bench.scorer.results import Meta, Result, TrafficLine

STATUSES = ("scored", "errored", "skipped", "stale", "unknown")
SCOPES = ("overall", "suite", "category")


@dataclass
class Counts:
    total: int = 0
    scored: int = 0
    passed: int = 0
    errored: int = 0
    skipped: int = 0
    stale: int = 0
    unknown: int = 0


@dataclass
class RateRow:
    """Pass rate of one model over one group: passed / scored, with its 95% Wilson interval."""

    model: str
    scope: str  # overall | suite | category
    group: str
    counts: Counts
    pass_rate: float | None
    low: float
    high: float


@dataclass
class EpochRow:
    """pass@k and pass^k of one model, averaged over the (run, test) pairs that have at least k scored epochs."""

    model: str
    k: int
    tests: int
    pass_at_k: float
    pass_hat_k: float


@dataclass
class Flaky:
    model: str
    run: str | None
    test: str
    passed: int
    scored: int


@dataclass
class Reliability:
    model: str
    results: int
    attempts: int
    retries: int
    results_retried: int
    errored: int
    failed_exchanges: int  # exchanges that did not complete with a 2xx status (retried or final)
    max_tokens: int = 0  # results whose answer stopped at the token limit (finish_reason length, or a what-if budget)
    no_finish_reason: int = 0  # results whose answer stream the server closed without a finish_reason


@dataclass
class ModelSettings:
    """What was asked and what answered: distinct values seen across the model's results."""

    model: str
    served_models: list[str]
    system_fingerprints: list[str]
    settings: dict[str, list[str]]  # setting name -> distinct values, JSON-encoded
    # How the seeds sent relate to the epochs (docs/record.md, "Seeds"): "fixed" (one seed), "per-epoch" (seed +
    # epoch, one base), "varied" (neither), None (no seed sent).
    seed_mode: str | None = None
    seed_base: int | None = None  # the fixed seed, or the per-epoch base (the seed of epoch 0)


@dataclass
class TaskTime:
    """Wall time per result (a task: every turn, tool runs included), in seconds; multi-turn results apart."""

    model: str
    results: int
    median_s: float | None
    p90_s: float | None
    max_s: float | None
    multi_turn: int
    multi_turn_median_s: float | None
    multi_turn_p90_s: float | None


@dataclass
class CallsRow:
    """A model's tool calls against the reference solutions', over its tool-using results."""

    model: str
    results: int
    same: int
    more: int
    fewer: int
    different: int
    made: int  # calls made, all results together
    reference: int  # calls the references make


@dataclass
class CassetteRow:
    """A cassette the scores came from; `truncated`: cut short (killed or interrupted), tests may be missing."""

    path: str
    run: str | None
    created: str | None
    truncated: bool


@dataclass
class ServerRow:
    """One served model as its engine described it at record time (a cassette header's `server`)."""

    cassette: str
    engine: str | None
    version: str | None
    model: str
    context_length: int | None
    trained_context: int | None
    quantization: str | None
    parameters: str | None
    kv_cache_type: str | None
    file: str | None

    def facts(self) -> dict[str, str]:
        """What tells two backends apart, in words (compare's "the backend changed" warning)."""
        named = {
            "engine": self.engine,
            "version": self.version,
            "context": self.context_length,
            "quantization": self.quantization,
            "parameters": self.parameters,
            "KV cache": self.kv_cache_type,
            "file": self.file,
        }
        return {k: str(v) for k, v in named.items() if v is not None}


def server_rows(meta: Meta) -> list[ServerRow]:
    rows = []
    for c in meta.cassettes:
        server = c.server
        if server is None:
            continue
        for m in server.models:
            rows.append(
                ServerRow(
                    c.path,
                    server.engine,
                    server.version,
                    m.id,
                    m.context_length,
                    m.trained_context,
                    m.quantization,
                    m.parameters,
                    m.kv_cache_type,
                    m.file,
                )
            )
    return rows


@dataclass
class RunInfo:
    bench_version: str | None
    scorer_version: str | None
    parser_version: int | None
    catalog_hash: str | None
    recorded_catalog_hashes: list[str]
    evaluators: dict[str, int]
    budgets: dict[str, int | float | None]
    cassettes: list[CassetteRow]
    servers: list[ServerRow] = field(default_factory=list)  # what served each model, per cassette


@dataclass
class Report:
    source: str
    run: RunInfo
    models: list[str]
    rates: list[RateRow]
    epochs: list[EpochRow]
    flaky: list[Flaky]
    failures: dict[str, dict[str, int]]
    reliability: list[Reliability]
    settings: list[ModelSettings]
    timing: dict[str, Timing]
    warnings: list[str] = field(default_factory=list)
    traffic: Traffic = field(default_factory=Traffic)
    cost: Cost | None = None  # with a price table (bench report --prices)
    # Models whose timing includes exchanges a replaying proxy served: replayed from a recording, not measured.
    replayed_timing: list[str] = field(default_factory=list)
    tasks: list[TaskTime] = field(default_factory=list)
    calls: list[CallsRow] = field(default_factory=list)
    levels: Levels | None = None  # a `bench load` run's levels (docs/load.md)
    failed_tests: FailedTests = field(default_factory=FailedTests)
    view_url: str | None = None  # `--view-url`: the HTML report links each failed test into bench view there


def build(scores: Scores | Stream, prices: Prices | None = None, slo: dict[str, float] | None = None) -> Report:
    """Aggregate one scores file (or an in-memory rescore) into a Report, with cost when given a price table, and a
    load run's goodput for `slo` (default: the SLO the run was recorded with, if any).

    Results and traffic lines are taken one at a time, in the file's order, so a Stream (a scores file read as it
    is aggregated) needs memory for the groups the report counts, not for the exchanges."""
    tally = ReportTally(prices, scores.meta, slo if slo is not None else recorded_slo(scores.meta))
    with paused_gc():
        if isinstance(scores, Stream):
            for line in scores.lines:
                if isinstance(line, Result):
                    tally.result(line)
                else:
                    tally.traffic_line(line)
        else:
            for result in scores.results:
                tally.result(result)
            for entry in scores.traffic:
                tally.traffic_line(entry)
        return tally.finish(scores.source, scores.meta)


class ReportTally:
    """A report's numbers gathered a result and a traffic line at a time."""

    def __init__(
        self, prices: Prices | None = None, meta: Meta | None = None, slo: dict[str, float] | None = None
    ) -> None:
        self.models: dict[str, ModelTally] = {}
        self.traffic = TrafficTally()
        self.cost = CostTally(prices) if prices is not None else None
        self.caveats = CaveatTally(meta or Meta())
        self.levels = LevelsTally(slo or {})
        self.failed = FailedTally()

    def result(self, result: Result) -> None:
        self.levels.result(result)
        model = str(result.model)
        tally = self.models.get(model)
        if tally is None:
            tally = self.models[model] = ModelTally()
        tally.add(result)
        self.caveats.add(result)
        self.failed.add(result)

    def traffic_line(self, entry: TrafficLine) -> None:
        self.traffic.add(entry)
        self.levels.traffic_line(entry)
        if self.cost is not None:
            self.cost.add(entry)

    def finish(self, source: str, meta: Meta) -> Report:
        models = sorted(self.models)
        scans = {m: self.models[m].finish(m) for m in models}
        report = Report(
            source=source,
            run=run_info(meta),
            models=models,
            rates=[row for m in models for row in scans[m].rates],
            epochs=[row for m in models for row in epochs(m, scans[m].epochs)],
            flaky=[f for m in models for f in flaky(m, scans[m].epochs)],
            failures={m: scans[m].failures for m in models},
            reliability=[scans[m].reliability for m in models],
            settings=[scans[m].settings for m in models],
            timing={m: self.models[m].timing.finish() for m in models},
            traffic=self.traffic.finish(),
            cost=self.cost.finish() if self.cost is not None else None,
            replayed_timing=[m for m in models if self.caveats.per_model[m][REPLAYED]],
            tasks=[scans[m].tasks for m in models if scans[m].tasks.results],
            calls=[scans[m].calls for m in models if scans[m].calls.results],
            levels=self.levels.finish(),
            failed_tests=self.failed.finish(),
        )
        report.warnings = self.caveats.lines() + warnings(report, {m: scans[m].fingerprints for m in models})
        if report.levels is not None:
            report.warnings.extend(report.levels.warnings)
        changes = report.traffic.fingerprint_changes
        if changes:
            report.warnings.append(
                f"the system fingerprint changed {len(changes)} time(s) between requests of one model in the traffic "
                "(see System fingerprint changes)"
            )
        return report


@dataclass
class Scan:
    """Everything but timing about one model, gathered in a single pass over its results (100k results: seconds)."""

    rates: list[RateRow]
    epochs: dict[tuple[str | None, str], tuple[int, int]]
    failures: dict[str, int]
    reliability: Reliability
    settings: ModelSettings
    fingerprints: dict[str | None, list[str]]  # run -> distinct fingerprints, only where there were several
    tasks: TaskTime
    calls: CallsRow
    decode_tokens_per_s: float | None  # median per exchange (see latency.Timing), also for untimed tallies


def scan(model: str, results: Iterable[Result]) -> Scan:
    tally = ModelTally()
    for result in results:
        tally.add(result)
    return tally.finish(model)


class ModelTally:
    """One model's counts, gathered a result at a time: memory bounded by its groups (suites, categories, tests
    and runs, distinct settings and fingerprints) and, for timing, by the distinct timing values."""

    def __init__(self, *, timed: bool = True) -> None:
        self.timed = timed  # a comparison needs no timing
        # One count per (suite, category, status, passed) combination: a handful of keys, summed into groups after.
        self.combos: Counter[tuple[str, str, str, bool]] = Counter()
        self.epoch_tally: dict[tuple[str | None, str], list[int]] = defaultdict(lambda: [0, 0])
        self.fail_counter: Counter[str] = Counter()
        self.served: set[str] = set()
        self.fps: dict[str | None, set[str]] = defaultdict(set)
        self.encoded_settings: set[bytes] = set()
        self.seeds: set[int] = set()
        self.seed_bases: set[int] = set()  # seed - epoch: one value when every epoch sent seed + epoch
        self.results = self.attempts = self.retries = self.retried = self.errored = self.failed = 0
        self.max_tokens = self.no_finish = 0
        self.timing = TimingTally()
        # Kept even untimed (a comparison): one value per result or exchange, not the ITL gaps.
        self.task_us, self.multi_turn_us, self.decode = ValueCounts(), ValueCounts(), ValueCounts()
        self.call_verdicts: Counter[str] = Counter()
        self.calls_made = self.calls_reference = 0

    def add(self, result: Result) -> None:
        self.results += 1
        status = str(result.status)
        passed = status == "scored" and bool(result.passed)
        self.combos[(str(result.suite or "?"), str(result.category or "?"), status, passed)] += 1
        if status == "scored":
            cell = self.epoch_tally[(result.run, str(result.test))]
            cell[0] += 1
            cell[1] += passed
        if (status == "scored" and not passed) or status == "errored":
            self.fail_counter[str(result.failure_type or "unclassified")] += 1
        self.attempts += int(result.attempts or 0)
        extra = int(result.retries or 0)
        self.retries += extra
        self.retried += extra > 0
        self.errored += status == "errored"
        flags = result_flags(result)
        self.max_tokens += MAX_TOKENS in flags
        self.no_finish += NO_FINISH in flags
        for ex in result.exchanges or ():
            code = ex.status
            if ex.outcome != "complete" or not isinstance(code, int) or code >= 400:
                self.failed += 1
            if self.timed:
                self.timing.add(ex)
            if ex.tpot_us:
                self.decode.add(1e6 / ex.tpot_us)
        if result.served_model:
            self.served.add(str(result.served_model))
        if result.system_fingerprint:
            self.fps[result.run].add(str(result.system_fingerprint))
        self.encoded_settings.add(orjson.dumps(result.settings or {}, option=orjson.OPT_SORT_KEYS))
        wall = task_seconds(result.exchanges or ())
        if wall is not None:
            self.task_us.add(round(wall * 1e6))
            if len({ex.turn for ex in result.exchanges}) > 1:
                self.multi_turn_us.add(round(wall * 1e6))
        calls = result.calls
        if calls is not None and status in ("scored", "errored"):
            self.call_verdicts[calls.verdict] += 1
            self.calls_made += calls.made
            self.calls_reference += calls.reference
        seed = (result.settings or {}).get("seed")
        if isinstance(seed, int) and not isinstance(seed, bool):
            self.seeds.add(seed)
            self.seed_bases.add(seed - int(result.epoch or 0))

    def finish(self, model: str) -> Scan:
        groups: dict[tuple[str, str], Counts] = defaultdict(Counts)
        for (suite, category, status, passed), n in self.combos.items():
            for where in (("overall", ""), ("suite", suite), ("category", category)):
                counts = groups[where]
                counts.total += n
                counts.passed += n if passed else 0
                if status in STATUSES:
                    setattr(counts, status, getattr(counts, status) + n)
        rows = []
        for (scope, group), counts in sorted(groups.items(), key=lambda g: (SCOPES.index(g[0][0]), g[0][1])):
            low, high = wilson(counts.passed, counts.scored)
            rows.append(
                RateRow(
                    model, scope, group, counts, counts.passed / counts.scored if counts.scored else None, low, high
                )
            )
        values: dict[str, list[Any]] = defaultdict(list)
        # Most results share one settings object: deduplicate whole objects first, then their values.
        for encoded in self.encoded_settings:
            for key, value in orjson.loads(encoded).items():
                values[key].append(value)
        fps = self.fps
        all_fps = sorted(set().union(*fps.values())) if fps else []
        return Scan(
            rates=rows,
            epochs={key: (n, c) for key, (n, c) in self.epoch_tally.items()},
            failures=dict(sorted(self.fail_counter.items(), key=lambda kv: (-kv[1], kv[0]))),
            reliability=Reliability(
                model,
                self.results,
                self.attempts,
                self.retries,
                self.retried,
                self.errored,
                self.failed,
                self.max_tokens,
                self.no_finish,
            ),
            settings=ModelSettings(
                model,
                sorted(self.served),
                all_fps,
                {key: _distinct(vals) for key, vals in sorted(values.items())},
                *seed_mode(self.seeds, self.seed_bases),
            ),
            fingerprints={run: sorted(f) for run, f in fps.items() if len(f) > 1},
            tasks=self._tasks(model),
            decode_tokens_per_s=median(*rates) if (rates := self.decode.sorted())[1].size else None,
            calls=CallsRow(
                model,
                sum(self.call_verdicts.values()),
                same=self.call_verdicts["same"],
                more=self.call_verdicts["more"],
                fewer=self.call_verdicts["fewer"],
                different=self.call_verdicts["different"],
                made=self.calls_made,
                reference=self.calls_reference,
            ),
        )

    def _tasks(self, model: str) -> TaskTime:
        every, multi = distribution(self.task_us), distribution(self.multi_turn_us)

        def seconds(ms: float | None) -> float | None:
            return None if ms is None else ms / 1000.0

        top = self.task_us.sorted()[0]
        return TaskTime(
            model,
            every.count,
            seconds(every.p50),
            seconds(every.p90),
            float(top[-1]) / 1e6 if top.size else None,
            multi.count,
            seconds(multi.p50),
            seconds(multi.p90),
        )


def seed_mode(seeds: set[int], bases: set[int]) -> tuple[str | None, int | None]:
    """The seed mode the recorded seeds show: one seed is fixed; several, each epoch's seed + epoch from one base, is
    per-epoch (the driver's own varied seed, not a setting that changed); anything else varied."""
    if not seeds:
        return None, None
    if len(seeds) == 1:
        return "fixed", next(iter(seeds))
    if len(bases) == 1:
        return "per-epoch", next(iter(bases))
    return "varied", None


def k_values(max_n: int) -> list[int]:
    """1, powers of two, and the largest epoch count: enough points to see the curve without a row per k."""
    ks = {1, max_n}
    k = 2
    while k < max_n:
        ks.add(k)
        k *= 2
    return sorted(ks)


def epochs(model: str, tally: dict[tuple[str | None, str], tuple[int, int]]) -> list[EpochRow]:
    counts = list(tally.values())
    max_n = max((n for n, _ in counts), default=0)
    if max_n < 2:
        return []
    rows = []
    for k in k_values(max_n):
        eligible = [(n, c) for n, c in counts if n >= k]
        at = sum(pass_at_k(n, c, k) for n, c in eligible) / len(eligible)
        hat = sum(pass_hat_k(n, c, k) for n, c in eligible) / len(eligible)
        rows.append(EpochRow(model, k, len(eligible), at, hat))
    return rows


def flaky(model: str, tally: dict[tuple[str | None, str], tuple[int, int]]) -> list[Flaky]:
    return [
        Flaky(model, run, test, c, n)
        for (run, test), (n, c) in sorted(tally.items(), key=lambda kv: (str(kv[0][0]), kv[0][1]))
        if n >= 2 and 0 < c < n
    ]


def _distinct(values: Iterable[Any]) -> list[str]:
    return sorted({orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode() for v in values})


def model_settings(model: str, results: Iterable[Result]) -> ModelSettings:
    return scan(model, results).settings


def recorded_slo(meta: Meta) -> dict[str, float]:
    """The SLO a `bench load` run was recorded with (its first cassette that says one)."""
    for cassette in meta.cassettes:
        load = cassette.run_meta.load
        if not isinstance(load, msgspec.UnsetType) and load.slo:
            return dict(load.slo)
    return {}


def run_info(meta: Meta) -> RunInfo:
    cassettes = [CassetteRow(c.path, c.run, c.created, c.truncated) for c in meta.cassettes]
    recorded = sorted({h for c in meta.cassettes if (h := c.run_meta.catalog_hash) is not None})
    return RunInfo(
        bench_version=meta.bench_version,
        scorer_version=meta.scorer_version,
        parser_version=meta.parser_version,
        catalog_hash=meta.catalog_hash,
        recorded_catalog_hashes=recorded,
        evaluators=dict(meta.evaluators),
        budgets={"max_tokens": meta.budgets.max_tokens, "deadline_s": meta.budgets.deadline_s},
        cassettes=cassettes,
        servers=server_rows(meta),
    )


def warnings(report: Report, fingerprints: dict[str, dict[str | None, list[str]]]) -> list[str]:
    out: list[str] = []
    for model in report.models:
        for run, fps in fingerprints[model].items():
            where = f"run {run}" if run else "the run"
            out.append(
                f"{model}: system fingerprint changed during {where} ({', '.join(fps)}): "
                "the backend changed mid-run, results before and after may differ"
            )
    for s in report.settings:
        for key, vals in s.settings.items():
            if key == "seed" and s.seed_mode == "per-epoch":
                continue  # seed + epoch by design (bench record's per-epoch mode): not a setting that changed
            if key != "stream" and len(vals) > 1:
                out.append(f"{s.model}: {key} varied within the run ({', '.join(vals)})")
    info = report.run
    changed = [h for h in info.recorded_catalog_hashes if info.catalog_hash and h != info.catalog_hash]
    if changed:
        out.append(f"catalog changed since recording (recorded {', '.join(changed)}, now {info.catalog_hash})")
    for row in report.rates:
        if row.scope != "overall":
            continue
        counts = row.counts
        if counts.stale:
            out.append(f"{row.model}: {counts.stale} stale result(s): their test changed since recording, not scored")
        if counts.unknown:
            out.append(f"{row.model}: {counts.unknown} result(s) for tests not in the catalog")
        if counts.total and not counts.scored:
            out.append(f"{row.model}: nothing was scored ({counts.total} results)")
    for model in report.models:
        broken = report.failures.get(model, {}).get(EVALUATOR_ERROR, 0)
        if broken:
            out.append(
                f"{model}: {broken} result(s) not scored: a check could not be evaluated (failure type "
                f"{EVALUATOR_ERROR}; each check's detail in the scores file says why)"
            )
    return out
