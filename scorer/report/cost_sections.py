"""The cost tables of `bench report --prices` and `bench compare --prices`."""

from __future__ import annotations

from bench.scorer.report.cells import Section
from bench.scorer.report.cost import Cost, CostDelta, CostRow

MAX_TEST_ROWS = 50


def money(value: float, currency: str) -> str:
    return f"{value:.4f} {currency}" if abs(value) < 1 else f"{value:.2f} {currency}"


def _row(r: CostRow, currency: str) -> list[str]:
    mark = "*" if r.estimated or r.missing_input else ""
    price = "unpriced" if r.unpriced == r.requests and r.requests else money(r.cost, currency) + mark
    return [r.key, str(r.requests), str(r.input_tokens), str(r.cached_input_tokens), str(r.output_tokens), price]


def cost_sections(c: Cost | None) -> list[Section]:
    if c is None or not c.total.requests:
        return []
    columns = ["requests", "input tokens", "cached input", "output tokens", "cost"]
    notes = ["Cost = (input - cached) x input price + cached x cached-input price + output x output price, per 1M."]
    if c.total.estimated or c.total.missing_input:
        notes.append("* estimated: some token counts were counted, not reported in usage, or missing (no usage).")
    if c.unpriced_models:
        notes.append("Not in the price table (no cost counted): " + ", ".join(c.unpriced_models))
    out = [
        Section(
            "Cost per model",
            ["model", *columns],
            [*(_row(r, c.currency) for r in c.per_model), _row(c.total, c.currency)],
            notes,
            numeric={1, 2, 3, 4, 5},
        )
    ]
    if c.per_test:
        rows = sorted(c.per_test, key=lambda r: -r.cost)[:MAX_TEST_ROWS]
        test_notes = ["Tagged exchanges (every attempt of every turn), most expensive first."]
        if len(c.per_test) > MAX_TEST_ROWS:
            test_notes.append(f"{len(c.per_test) - MAX_TEST_ROWS} more tests not shown (see --format json).")
        out.append(
            Section(
                "Cost per test", ["test", *columns], [_row(r, c.currency) for r in rows], test_notes, {1, 2, 3, 4, 5}
            )
        )
    return out


def cost_delta_section(rows: list[CostDelta], currency: str) -> Section:
    return Section(
        "Cost difference",
        ["model", "A", "B", "B - A", "requests A", "requests B"],
        [
            [
                r.model,
                money(r.a, currency),
                money(r.b, currency),
                ("+" if r.delta > 0 else "") + money(r.delta, currency),
                str(r.a_requests),
                str(r.b_requests),
            ]
            for r in rows
        ],
        ["From each side's traffic and the same price table."],
        numeric={1, 2, 3, 4, 5},
    )
