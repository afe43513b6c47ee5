"""Compare two runs result by result: what regressed, what improved, and whether the difference is more than noise.

Results are paired by (model, test, epoch). Only pairs scored on both sides enter the test: the exact McNemar test
on the discordant pairs (pass->fail against fail->pass), per model and per category. A regression is called
significant when its p-value is below ALPHA divided by the number of rows tested (Bonferroni), which keeps the
chance of a false alarm across the whole comparison at or below ALPHA.
"""

from __future__ import annotations

import shlex
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from bench.scorer.caveats import CaveatTally
from bench.scorer.report.aggregate import CallsRow, ModelSettings, ModelTally, ServerRow, run_info
from bench.scorer.report.load import Scores, Stream
from bench.scorer.report.stats import mcnemar_exact, paired_bootstrap
from bench.scorer.results import Meta, Result

ALPHA = 0.05
RULE = (
    "significant regression: a model or category row with more pass->fail than fail->pass pairs whose two-sided "
    "exact McNemar p-value is below 0.05 / (rows tested) (Bonferroni)"
)

Key = tuple[str, str, int]  # model, test, epoch


@dataclass
class Change:
    model: str
    test: str
    epoch: int
    category: str
    before: str  # pass | fail
    after: str
    failure_type: str | None  # of the failing side
    commands: list[str]  # `bench cassette show` for the exchanges of the side that failed


@dataclass
class Delta:
    model: str
    scope: str  # overall | category
    group: str
    pairs: int
    rate_a: float | None
    rate_b: float | None
    regressed: int  # pass -> fail
    improved: int  # fail -> pass
    p_value: float
    significant: bool = False
    verdict: str = "no significant change"
    score_delta: float | None = None  # mean paired score difference (B - A), with its bootstrap interval
    score_low: float | None = None
    score_high: float | None = None


@dataclass
class Comparison:
    a: str
    b: str
    rule: str
    threshold: float
    deltas: list[Delta]
    regressions: list[Change]
    improvements: list[Change]
    paired: int
    not_comparable: int  # paired but not scored on both sides
    only_a: int
    only_b: int
    warnings: list[str] = field(default_factory=list)
    speed: list[SpeedRow] = field(default_factory=list)  # per model: decode speed, seconds per task, tool calls

    @property
    def significant_regression(self) -> bool:
        return any(d.significant and d.regressed > d.improved for d in self.deltas)


class Paired(msgspec.Struct, frozen=True, gc=False):
    """What a comparison keeps of a result: no checks, no timing (most of a line), only the ids of its final
    exchanges for the `bench cassette show` hints."""

    status: str
    passed: bool | None
    score: float | None
    test_hash: str | None
    category: str | None
    failure_type: str | None
    cassette: str
    final_ids: tuple[str, ...]


@dataclass
class Side:
    """One run as a comparison needs it, gathered in one pass over its results: memory grows with its results (a
    small record each), not with their exchanges."""

    source: str
    base: Path
    remote_base: str | None
    meta: Meta
    index: dict[Key, Paired]  # (model, test, epoch) -> the last result with that key in the file
    duplicates: int
    settings: dict[str, ModelSettings]  # per model
    caveats: list[str] = field(default_factory=list)  # bench.scorer.caveats: what the numbers cannot show
    speed: dict[str, ModelSpeed] = field(default_factory=dict)  # per model


@dataclass
class ModelSpeed:
    """What a comparison shows of a model's speed and tool use, beside pass rates."""

    decode_tokens_per_s: float | None
    task_median_s: float | None
    calls: CallsRow


@dataclass
class SpeedRow:
    model: str
    a: ModelSpeed | None
    b: ModelSpeed | None


def side(scores: Scores | Stream) -> Side:
    results = scores.results if isinstance(scores, Scores) else (x for x in scores.lines if isinstance(x, Result))
    index: dict[Key, Paired] = {}
    tallies: dict[str, ModelTally] = {}
    caveats = CaveatTally(scores.meta)
    duplicates = 0
    for result in results:
        caveats.add(result)
        key = (str(result.model), str(result.test), int(result.epoch or 0))
        duplicates += key in index
        exchanges = result.exchanges or []
        final = [ex for ex in exchanges if ex.final] or exchanges
        index[key] = Paired(
            result.status,
            result.passed,
            result.score,
            result.test_hash,
            result.category,
            result.failure_type,
            result.cassette,
            tuple(ex.id for ex in final),
        )
        tally = tallies.get(key[0])
        if tally is None:
            tally = tallies[key[0]] = ModelTally(timed=False)
        tally.add(result)
    scans = {model: tally.finish(model) for model, tally in tallies.items()}
    settings = {model: scan.settings for model, scan in scans.items()}
    speed = {m: ModelSpeed(x.decode_tokens_per_s, x.tasks.median_s, x.calls) for m, x in scans.items()}
    return Side(
        scores.source, scores.base, scores.remote_base, scores.meta, index, duplicates, settings, caveats.lines(), speed
    )


def show_commands(run: Side, result: Paired) -> list[str]:
    cassette = result.cassette
    if not cassette:
        return []
    # A cassette named by URL (rescored from object storage) stays one; one named relative to a scores file on
    # object storage is next to it there.
    if "://" in cassette:
        where = cassette
    elif run.remote_base is not None:
        where = run.remote_base + "/" + cassette
    else:
        where = str(run.base / cassette)
    path = shlex.quote(where)
    return [f"bench cassette show {path} --id {shlex.quote(ident)}" for ident in result.final_ids]


def compare(first: Scores | Stream | Side, second: Scores | Stream | Side) -> Comparison:
    a = first if isinstance(first, Side) else side(first)
    b = second if isinstance(second, Side) else side(second)
    warnings = like_for_like(a, b)
    for run, name in ((a, "A"), (b, "B")):
        if run.duplicates:
            warnings.append(
                f"{name} holds {run.duplicates} result(s) sharing a (model, test, epoch) with another run: "
                "the last one is used"
            )
    ia, ib = a.index, b.index
    shared = sorted(set(ia) & set(ib))
    both = [(key, ia[key], ib[key]) for key in shared if ia[key].status == "scored" and ib[key].status == "scored"]
    hash_changed = sum(ra.test_hash != rb.test_hash for _key, ra, rb in both)
    if hash_changed:
        warnings.append(f"{hash_changed} paired result(s) were recorded from different versions of their test")
    regressions, improvements = _flips(both, a, b)
    deltas = paired_deltas(both)
    comparison = Comparison(
        a=a.source,
        b=b.source,
        rule=RULE,
        threshold=ALPHA / max(1, len(deltas)),
        deltas=deltas,
        regressions=regressions,
        improvements=improvements,
        paired=len(shared),
        not_comparable=len(shared) - len(both),
        only_a=len(set(ia) - set(ib)),
        only_b=len(set(ib) - set(ia)),
        warnings=warnings,
        speed=[SpeedRow(m, a.speed.get(m), b.speed.get(m)) for m in sorted(set(a.speed) | set(b.speed))],
    )
    for d in deltas:
        d.significant = d.p_value < comparison.threshold
        if d.significant:
            d.verdict = "significant regression" if d.regressed > d.improved else "significant improvement"
    if comparison.only_a or comparison.only_b:
        warnings.append(
            f"{comparison.only_a} result(s) only in A and {comparison.only_b} only in B: the runs cover different tests"
        )
    return comparison


def _flips(both: list[tuple[Key, Paired, Paired]], a: Side, b: Side) -> tuple[list[Change], list[Change]]:
    """(regressions, improvements): the paired results that passed on one side and failed on the other."""
    regressions: list[Change] = []
    improvements: list[Change] = []
    for (model, test, epoch), ra, rb in both:
        pa, pb = bool(ra.passed), bool(rb.passed)
        if pa == pb:
            continue
        loser, run = (rb, b) if pa else (ra, a)
        change = Change(
            model,
            test,
            epoch,
            str(rb.category or "?"),
            "pass" if pa else "fail",
            "pass" if pb else "fail",
            loser.failure_type,
            show_commands(run, loser),
        )
        (regressions if pa else improvements).append(change)
    return regressions, improvements


def paired_deltas(both: list[tuple[Key, Paired, Paired]]) -> list[Delta]:
    groups: dict[tuple[str, str, str], list[tuple[Paired, Paired]]] = defaultdict(list)
    for (model, _test, _epoch), ra, rb in both:
        groups[(model, "overall", "")].append((ra, rb))
        groups[(model, "category", str(rb.category or "?"))].append((ra, rb))
    deltas = []
    for (model, scope, group), pairs in sorted(groups.items()):
        passed_a = [bool(ra.passed) for ra, _ in pairs]
        passed_b = [bool(rb.passed) for _, rb in pairs]
        regressed = sum(x and not y for x, y in zip(passed_a, passed_b, strict=True))
        improved = sum(y and not x for x, y in zip(passed_a, passed_b, strict=True))
        delta = Delta(
            model,
            scope,
            group,
            len(pairs),
            sum(passed_a) / len(pairs),
            sum(passed_b) / len(pairs),
            regressed,
            improved,
            mcnemar_exact(regressed, improved),
        )
        if scope == "overall":
            # Scores are not just pass/fail (partial credit): the bootstrap shows how far the mean score moved.
            mean, low, high = paired_bootstrap(
                [float(ra.score or 0.0) for ra, _ in pairs],
                [float(rb.score or 0.0) for _, rb in pairs],
                resamples=1000,
            )
            delta.score_delta, delta.score_low, delta.score_high = mean, low, high
        deltas.append(delta)
    return deltas


def like_for_like(a: Side, b: Side) -> list[str]:
    """Warnings for every difference between the runs that could explain a change other than the model itself."""
    out: list[str] = []
    ra, rb = run_info(a.meta), run_info(b.meta)
    if ra.catalog_hash != rb.catalog_hash:
        out.append(f"catalog differs (A {ra.catalog_hash}, B {rb.catalog_hash}): tests may have changed")
    if ra.scorer_version != rb.scorer_version or ra.parser_version != rb.parser_version:
        out.append(
            f"scorer differs (A {ra.scorer_version}/parser {ra.parser_version}, "
            f"B {rb.scorer_version}/parser {rb.parser_version}): rescore both with the same bench"
        )
    changed = sorted(k for k in set(ra.evaluators) | set(rb.evaluators) if ra.evaluators.get(k) != rb.evaluators.get(k))
    if changed:
        out.append(
            "evaluator versions differ: "
            + ", ".join(f"{k} (A {ra.evaluators.get(k)}, B {rb.evaluators.get(k)})" for k in changed)
        )
    if ra.budgets != rb.budgets:
        out.append(f"scoring budgets differ (A {ra.budgets}, B {rb.budgets})")
    for name, run in (("A", a), ("B", b)):
        out.extend(f"{name}: {line}" for line in run.caveats)
        if any(c.truncated or c.interrupted for c in run.meta.cassettes):
            out.append(f"{name} is an interrupted run: its missing tests are not regressions")
    out.extend(model_warnings(a, b))
    out.extend(server_warnings(ra.servers, rb.servers))
    return out


def server_warnings(a: list[ServerRow], b: list[ServerRow]) -> list[str]:
    """Per model served on both sides, each fact of its server (engine, version, context, quantization...) that
    differs: two runs of one model name on different quantizations or engines are not the same backend."""
    out = []
    by_a: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    by_b: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for rows, into in ((a, by_a), (b, by_b)):
        for row in rows:
            for key, value in row.facts().items():
                into[row.model][key].add(value)
    for model in sorted(set(by_a) & set(by_b)):
        fa, fb = by_a[model], by_b[model]
        changed = [
            f"{key} {', '.join(sorted(fa.get(key, ()))) or '–'} -> {', '.join(sorted(fb.get(key, ()))) or '–'}"
            for key in sorted(set(fa) | set(fb))
            if fa.get(key) != fb.get(key)
        ]
        if changed:
            out.append(f"{model}: the backend changed between runs ({'; '.join(changed)})")
    return out


SEEDED = ("fixed", "per-epoch")


def _seed_words(s: ModelSettings) -> str:
    return f"{s.seed_base} ({s.seed_mode})"


def model_warnings(a: Side, b: Side) -> list[str]:
    out: list[str] = []
    by_a, by_b = a.settings, b.settings
    for model in sorted(set(by_a) ^ set(by_b)):
        out.append(f"model {model} is only in {'A' if model in by_a else 'B'}")
    for model in sorted(set(by_a) & set(by_b)):
        sa, sb = by_a[model], by_b[model]
        for key in sorted(set(sa.settings) | set(sb.settings)):
            va, vb = sa.settings.get(key, []), sb.settings.get(key, [])
            if key == "seed" and sa.seed_mode in SEEDED and sb.seed_mode in SEEDED:
                # Per-epoch seeds differ with the epoch count alone: the mode and its base are what was chosen.
                va, vb = [_seed_words(sa)], [_seed_words(sb)]
            if va != vb:
                what = "seed" if key == "seed" else f"sampling setting {key}"
                out.append(f"{model}: {what} differs (A {', '.join(va) or '–'}, B {', '.join(vb) or '–'})")
        if sa.served_models != sb.served_models:
            out.append(
                f"{model}: served model differs (A {', '.join(sa.served_models)}, B {', '.join(sb.served_models)})"
            )
        if sa.system_fingerprints != sb.system_fingerprints:
            out.append(
                f"{model}: system fingerprint differs (A {', '.join(sa.system_fingerprints) or '–'}, "
                f"B {', '.join(sb.system_fingerprints) or '–'}): the backend changed between runs"
            )
    return out
