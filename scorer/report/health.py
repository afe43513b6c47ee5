"""Catalog health across runs: which tests tell models apart, which never can, and which are noise.

A test earns its place when models score differently on it. One that every model passes in every run (saturated) or
that nobody ever passes measures nothing any more; one whose epochs disagree measures luck as much as skill.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.scorer.caveats import CaveatTally
from bench.scorer.report.load import Scores, Stream
from bench.scorer.results import Result

# Pass rates of the best and worst model must differ by at least this much for a test to count as separating.
SEPARATION = 0.5


@dataclass
class TestHealth:
    test: str
    suite: str
    category: str
    scored: int
    pass_rate: float | None
    model_rates: dict[str, float]  # model -> pass rate over all its runs and epochs
    spread: float | None  # best minus worst model pass rate; None with fewer than two models
    verdict: str  # separates | weak | same for all models | all pass | all fail | not scored
    runs: int  # runs in which the test was scored
    saturated_runs: int  # runs in which every scored result passed
    epoch_groups: int  # (run, model) groups with two or more scored epochs
    unstable_groups: int  # of those, groups whose epochs disagree


@dataclass
class Health:
    sources: list[str]
    models: list[str]
    separation: float
    tests: list[TestHealth]
    counts: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # each run's caveats (bench.scorer.caveats)

    @property
    def saturated(self) -> list[TestHealth]:
        return [t for t in self.tests if t.runs and t.saturated_runs == t.runs]

    @property
    def unstable(self) -> list[TestHealth]:
        return sorted(
            (t for t in self.tests if t.unstable_groups),
            key=lambda t: (-t.unstable_groups / t.epoch_groups, t.test),
        )


def verdict(scored: int, passed: int, rates: dict[str, float]) -> tuple[str, float | None]:
    if not scored:
        return "not scored", None
    spread = max(rates.values()) - min(rates.values()) if len(rates) > 1 else None
    if passed == scored:
        return "all pass", spread
    if passed == 0:
        return "all fail", spread
    if spread is None:
        return "one model only", None
    if spread >= SEPARATION:
        return "separates", spread
    return ("weak" if spread > 0 else "same for all models"), spread


def health(runs: Sequence[Scores | Stream]) -> Health:
    """Health over the runs, each read once, a result at a time: memory bounded by the tests, models, runs and
    epoch groups tallied, not by the results."""
    tally = HealthTally()
    for i, scores in enumerate(runs):
        tally.run(i, scores)
    return tally.finish([s.source for s in runs])


class TestTally:
    """One test's counts across the runs."""

    __test__ = False  # not a pytest class, whatever its name

    def __init__(self, suite: str, category: str) -> None:
        self.suite, self.category = suite, category
        self.model_tally: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        self.run_tally: dict[tuple[int, str | None], list[int]] = defaultdict(lambda: [0, 0])
        self.epoch_tally: dict[tuple[int, str | None, str], list[int]] = defaultdict(lambda: [0, 0])

    def add(self, i: int, result: Result) -> None:
        if result.status != "scored":
            return
        ok = int(bool(result.passed))
        model, run = str(result.model), result.run
        for tally in (self.model_tally[model], self.run_tally[(i, run)], self.epoch_tally[(i, run, model)]):
            tally[0] += 1
            tally[1] += ok

    def finish(self, test: str) -> TestHealth:
        scored = sum(n for n, _ in self.model_tally.values())
        passed = sum(c for _, c in self.model_tally.values())
        rates = {m: c / n for m, (n, c) in sorted(self.model_tally.items())}
        kind, spread = verdict(scored, passed, rates)
        groups = [(n, c) for n, c in self.epoch_tally.values() if n >= 2]
        return TestHealth(
            test=test,
            suite=self.suite,
            category=self.category,
            scored=scored,
            pass_rate=passed / scored if scored else None,
            model_rates=rates,
            spread=spread,
            verdict=kind,
            runs=len(self.run_tally),
            saturated_runs=sum(1 for n, c in self.run_tally.values() if n == c),
            epoch_groups=len(groups),
            unstable_groups=sum(1 for n, c in groups if 0 < c < n),
        )


class HealthTally:
    def __init__(self) -> None:
        self.tests: dict[str, TestTally] = {}
        self.models: set[str] = set()
        self.warnings: list[str] = []

    def run(self, i: int, scores: Scores | Stream) -> None:
        results = scores.results if isinstance(scores, Scores) else (x for x in scores.lines if isinstance(x, Result))
        caveats = CaveatTally(scores.meta)
        for result in results:
            caveats.add(result)
            test = str(result.test)
            tally = self.tests.get(test)
            if tally is None:
                # A test's suite and category are those of its first result, as they were when every result was held.
                tally = self.tests[test] = TestTally(str(result.suite or "?"), str(result.category or "?"))
            tally.add(i, result)
            self.models.add(str(result.model))
        self.warnings.extend(f"{scores.source}: {line}" for line in caveats.lines())

    def finish(self, sources: list[str]) -> Health:
        tests = [self.tests[test].finish(test) for test in sorted(self.tests)]
        counts: dict[str, int] = defaultdict(int)
        for t in tests:
            counts[t.verdict] += 1
        return Health(sources, sorted(self.models), SEPARATION, tests, dict(sorted(counts.items())), self.warnings)
