"""The comparison as titled tables, for the terminal and Markdown renderers."""

from __future__ import annotations

from bench.scorer.report.cells import Section, pct, rate, seconds
from bench.scorer.report.compare import Change, Comparison, ModelSpeed

MAX_CHANGES = 50


def p_text(p: float) -> str:
    return f"{p:.2g}" if p < 0.001 else f"{p:.3f}"


def delta_section(comparison: Comparison, scope: str, title: str) -> Section:
    rows = []
    for d in comparison.deltas:
        if d.scope != scope:
            continue
        lead = [d.model] if scope == "overall" else [d.model, d.group]
        change = "–" if d.rate_a is None or d.rate_b is None else f"{100 * (d.rate_b - d.rate_a):+.1f} pts"
        score = "" if d.score_delta is None else f"{d.score_delta:+.3f} [{d.score_low:+.3f}, {d.score_high:+.3f}]"
        row = [*lead, str(d.pairs), pct(d.rate_a), pct(d.rate_b), change, str(d.regressed), str(d.improved)]
        row += [p_text(d.p_value), d.verdict if d.significant else "–"]
        if scope == "overall":
            row.append(score)
        rows.append(row)
    lead_cols = ["model"] if scope == "overall" else ["model", "category"]
    cols = [*lead_cols, "pairs", "A", "B", "change", "pass→fail", "fail→pass", "McNemar p", "verdict"]
    if scope == "overall":
        cols.append("score Δ [95% CI]")
    first = len(lead_cols)
    return Section(title, cols, rows, numeric=set(range(first, first + 7)))


def change_section(changes: list[Change], title: str) -> Section:
    rows = [
        [c.model, c.test, str(c.epoch), f"{c.before}→{c.after}", c.failure_type or "–", "\n".join(c.commands) or "–"]
        for c in changes[:MAX_CHANGES]
    ]
    notes = [f"{len(changes) - MAX_CHANGES} more not shown (see --format json)."] if len(changes) > MAX_CHANGES else []
    return Section(title, ["model", "test", "epoch", "change", "failure", "see the exchanges"], rows, notes, {2})


def _speed_cells(side: ModelSpeed | None) -> list[str]:
    if side is None:
        return ["–"] * 3
    c = side.calls
    calls = "–" if not c.results else f"{c.same}/{c.more}/{c.fewer}/{c.different}"
    return [rate(side.decode_tokens_per_s), seconds(side.task_median_s), calls]


def speed_section(comparison: Comparison) -> Section:
    rows = []
    for row in comparison.speed:
        a, b = _speed_cells(row.a), _speed_cells(row.b)
        rows.append([row.model, a[0], b[0], a[1], b[1], a[2], b[2]])
    return Section(
        "Speed and tool calls",
        ["model", "decode tok/s A", "decode tok/s B", "task p50 s A", "task p50 s B", "calls A", "calls B"],
        rows,
        notes=[
            "decode tok/s: median per exchange of (output tokens - 1) / (E2EL - TTFT); task: a result's wall time, "
            "every turn included; calls: tool-using results whose calls were the same as the reference's / more / "
            "fewer / as many to other tools."
        ],
        numeric={1, 2, 3, 4},
    )


def sections(comparison: Comparison) -> list[Section]:
    summary = Section(
        "Comparison",
        ["", ""],
        [
            ["A", comparison.a],
            ["B", comparison.b],
            ["paired results", str(comparison.paired)],
            ["not scored on both sides", str(comparison.not_comparable)],
            ["only in A / only in B", f"{comparison.only_a} / {comparison.only_b}"],
            ["rule", comparison.rule],
            ["threshold", f"p < {comparison.threshold:.3g}"],
            ["significant regression", "yes" if comparison.significant_regression else "no"],
        ],
    )
    all_sections = [
        summary,
        delta_section(comparison, "overall", "Change per model"),
        delta_section(comparison, "category", "Change per category"),
        speed_section(comparison),
        change_section(comparison.regressions, "Regressions (pass → fail)"),
        change_section(comparison.improvements, "Improvements (fail → pass)"),
    ]
    return [s for s in all_sections if s.rows]
