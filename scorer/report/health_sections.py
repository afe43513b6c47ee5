"""Catalog health as titled tables, for the terminal and Markdown renderers."""

from __future__ import annotations

from bench.scorer.report.cells import Section, pct
from bench.scorer.report.health import Health, TestHealth

MAX_ROWS = 40


def _rates(t: TestHealth) -> str:
    return ", ".join(f"{m} {100 * r:.0f}%" for m, r in t.model_rates.items())


def _limited(title: str, cols: list[str], rows: list[list[str]], notes: list[str], numeric: set[int]) -> Section:
    if len(rows) > MAX_ROWS:
        notes = [*notes, f"{len(rows) - MAX_ROWS} more not shown (see --format json)."]
    return Section(title, cols, rows[:MAX_ROWS], notes, numeric)


def sections(h: Health) -> list[Section]:
    summary = Section(
        "Catalog health",
        ["", ""],
        [
            ["runs", ", ".join(h.sources)],
            ["models", ", ".join(h.models)],
            ["tests", str(len(h.tests))],
            *([f"verdict: {k}", str(n)] for k, n in h.counts.items()),
            ["saturated across runs", str(len(h.saturated))],
            ["unstable across epochs", str(len(h.unstable))],
        ],
        notes=[
            f"separates: best and worst model pass rates differ by ≥ {100 * h.separation:.0f} points; weak: they "
            "differ by less; all pass / all fail: every scored result of every model in every run."
        ],
    )
    separating = sorted((t for t in h.tests if t.spread is not None and t.spread > 0), key=lambda t: -(t.spread or 0))
    sep = _limited(
        "Tests that separate models",
        ["test", "category", "spread", "pass rate per model"],
        [[t.test, t.category, pct(t.spread), _rates(t)] for t in separating],
        ["Sorted by spread (best minus worst model pass rate)."],
        {2},
    )
    flat = [t for t in h.tests if t.verdict in ("all pass", "all fail", "same for all models")]
    no_sep = _limited(
        "Tests that do not separate models",
        ["test", "category", "verdict", "scored"],
        [[t.test, t.category, t.verdict, str(t.scored)] for t in flat],
        [],
        {3},
    )
    sat = _limited(
        "Saturated across runs",
        ["test", "category", "runs all passed", "scored"],
        [[t.test, t.category, f"{t.saturated_runs}/{t.runs}", str(t.scored)] for t in h.saturated],
        ["Every model passed every epoch in every run: the test no longer measures anything."],
        {2, 3},
    )
    unstable = _limited(
        "Unstable across epochs",
        ["test", "category", "disagreeing (run, model) groups", "pass rate per model"],
        [[t.test, t.category, f"{t.unstable_groups}/{t.epoch_groups}", _rates(t)] for t in h.unstable],
        ["A group is one model in one run; it disagrees when some epochs passed and others failed."],
        {2},
    )
    return [s for s in (summary, sep, no_sep, sat, unstable) if s.rows]
