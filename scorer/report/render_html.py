"""The report as one self-contained HTML file: inline CSS and SVG, no script, no font or file fetched from anywhere."""

from __future__ import annotations

import functools
from collections.abc import Callable
from html import escape

from bench.scorer.report import svg
from bench.scorer.report.aggregate import Report
from bench.scorer.report.cells import Section
from bench.scorer.report.failed_tests import view_base, view_link
from bench.scorer.report.latency import CDF, Dist
from bench.scorer.report.levels import LevelRow, Levels, x_value
from bench.scorer.report.sections import sections

CSS = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1100px;padding:0 1rem;color:#111;background:#fff}
h1{font-size:1.6rem}h2{font-size:1.25rem;margin-top:2rem;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5rem 0;font-size:.9rem}
th,td{border:1px solid #ccc;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f0f0f0}td.n{text-align:right;font-variant-numeric:tabular-nums}
.warn{background:#fff4d6;border-left:4px solid #b07d00;padding:.5rem 1rem;margin:.25rem 0}
.note{color:#444;font-size:.85rem}.charts svg{display:block;margin:1rem 0;max-width:100%;height:auto}
"""

LATENCY = (
    ("ttft_ms", "Time to first token (TTFT)"),
    ("tpot_ms", "Time per output token (TPOT)"),
    ("itl_ms", "Inter-token latency (ITL, all gaps pooled)"),
    ("e2el_ms", "End-to-end latency (E2EL)"),
)


def html_table(section: Section) -> str:
    head = "".join(f"<th scope='col'>{escape(c)}</th>" for c in section.columns)
    body = "".join(
        "<tr>"
        + "".join(f"<td{' class=n' if i in section.numeric else ''}>{escape(v)}</td>" for i, v in enumerate(row))
        + "</tr>"
        for row in section.rows
    )
    notes = "".join(f"<p class='note'>{escape(n)}</p>" for n in section.notes)
    return f"<h2>{escape(section.title)}</h2><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{notes}"


def charts(report: Report) -> list[str]:
    # A load run's charts first: they are what its report is read for.
    out: list[str] = level_charts(report.levels) if report.levels is not None else []
    cells = {
        (r.group, r.model): (r.pass_rate, r.low, r.high)
        for r in report.rates
        if r.scope == "category" and r.pass_rate is not None
    }
    categories = sorted({group for group, _ in cells})
    if cells:
        out.append(svg.pass_rate_chart("chart-pass", "Pass rate by category", categories, report.models, cells))
    for i, (attr, title) in enumerate(LATENCY):
        rows = [(m, getattr(report.timing[m], attr).box) for m in report.models]
        if any(box for _, box in rows):
            out.append(svg.box_chart(f"chart-box-{i}", title, "milliseconds", rows))
    for attr, title in (("ttft_ms", "TTFT distribution (CDF)"), ("itl_ms", "ITL distribution (CDF)")):
        series = [(m, getattr(report.timing[m], attr).cdf) for m in report.models]
        if any(pts for _, pts in series):
            out.append(svg.cdf_chart(f"chart-cdf-{attr}", title, "milliseconds", series, list(CDF)))
    if any(report.failures.values()):
        out.append(svg.stacked_chart("chart-failures", "Failure types per model", report.models, report.failures))
    out.extend(traffic_charts(report))
    return out


def _points(levels: Levels, value: Callable[[LevelRow], float | None]) -> list[svg.Point]:
    """One point per level; a sweep joins its rate levels only (its synchronous and throughput levels are marked at
    the rate they sent, not joined: another kind of load)."""
    mixed = {r.kind for r in levels.rows} - {"rate"} and "rate" in {r.kind for r in levels.rows}
    pts = []
    for row in levels.rows:
        x, y = x_value(row, levels.x_label), value(row)
        if x is not None and y is not None:
            pts.append((x, y, not mixed or row.kind == "rate"))
    return pts


def _dist(attr: str, q: str) -> Callable[[LevelRow], float | None]:
    def pick(row: LevelRow) -> float | None:
        dist: Dist = getattr(row.timing, attr)
        return getattr(dist, q) if dist.count else None

    return pick


def _share(value: Callable[[LevelRow], float | None]) -> Callable[[LevelRow], float | None]:
    def pick(row: LevelRow) -> float | None:
        found = value(row)
        return None if found is None else 100 * found

    return pick


def level_charts(levels: Levels) -> list[str]:
    """Each metric against load, one point per level (a load run's levels, docs/load.md)."""
    return list(level_chart_svgs(levels).values())


def level_chart_svgs(levels: Levels) -> dict[str, str]:
    """The load charts by name (`throughput`, `tokens`, `ttft`, `itl`, `e2el`, `shares`, `late`), as SVG documents."""
    x = levels.x_label
    pts = functools.partial(_points, levels)
    specs = [
        ("chart-load-throughput", "Request throughput against load", "requests/s", [
            ("completed", pts(lambda r: r.request_throughput)), ("goodput", pts(lambda r: r.goodput)),
            ("sent", pts(lambda r: r.sent_per_s)),
        ]),
        ("chart-load-tokens", "Token throughput against load", "tokens/s", [
            ("output", pts(lambda r: r.output_throughput)), ("total", pts(lambda r: r.total_throughput)),
        ]),
        ("chart-load-ttft", "TTFT against load", "milliseconds", [
            ("p50", pts(_dist("ttft_ms", "p50"))), ("p99", pts(_dist("ttft_ms", "p99"))),
        ]),
        ("chart-load-itl", "ITL and TPOT against load", "milliseconds", [
            ("ITL p50", pts(_dist("itl_ms", "p50"))), ("ITL p99", pts(_dist("itl_ms", "p99"))),
            ("TPOT p50", pts(_dist("tpot_ms", "p50"))),
        ]),
        ("chart-load-e2el", "E2EL against load", "milliseconds", [
            ("p50", pts(_dist("e2el_ms", "p50"))), ("p99", pts(_dist("e2el_ms", "p99"))),
        ]),
        ("chart-load-shares", "SLO attainment, pass rate and errors against load", "% of requests", [
            ("SLO attained", pts(_share(lambda r: r.slo_attainment))),
            ("passed", pts(_share(lambda r: r.pass_rate))),
            ("failed", pts(_share(lambda r: r.failed / r.requests if r.requests else None))),
        ]),
        ("chart-load-late", "The generator's send lateness against load", "milliseconds", [
            ("p50", pts(_dist_of("lateness_ms", "p50"))), ("p99", pts(_dist_of("lateness_ms", "p99"))),
        ]),
    ]  # fmt: skip
    return {
        ident.removeprefix("chart-load-"): svg.line_chart(ident, title, x, unit, series)
        for ident, title, unit, series in specs
        if any(points for _, points in series)
    }


def _dist_of(attr: str, q: str) -> Callable[[LevelRow], float | None]:
    def pick(row: LevelRow) -> float | None:
        dist: Dist = getattr(row, attr)
        return getattr(dist, q) if dist.count else None

    return pick


def traffic_charts(report: Report) -> list[str]:
    """Requests by status per traffic group, and the E2EL box per group (every endpoint has an E2EL)."""
    rows = report.traffic.rows
    if not rows:
        return []
    labels = [r.label for r in rows]
    # Two groups may share a label (they differ by served model only): their counts add up in one bar.
    statuses: dict[str, dict[str, int]] = {}
    for r in rows:
        bucket = statuses.setdefault(r.label, {})
        for status, n in r.statuses.items():
            bucket[f"HTTP {status}"] = bucket.get(f"HTTP {status}", 0) + n
    unique = list(dict.fromkeys(labels))
    out = [
        svg.stacked_chart(
            "chart-traffic-status", "Traffic: requests by status", unique, statuses, axis="requests", empty="none"
        )
    ]
    boxes = [(r.label, r.timing.e2el_ms.box) for r in rows]
    if any(box for _, box in boxes):
        out.append(svg.box_chart("chart-traffic-e2el", "Traffic: end-to-end latency (E2EL)", "milliseconds", boxes))
    ttft = [(r.label, r.timing.ttft_ms.box) for r in rows if r.timing.ttft_ms.box]
    if ttft:
        out.append(svg.box_chart("chart-traffic-ttft", "Traffic: time to first token (TTFT)", "milliseconds", ttft))
    return out


def failed_list(report: Report) -> str:
    """Every failed test (up to failed_tests.MAX_LISTED), each linked to its page in bench view with --view-url."""
    failed = report.failed_tests
    if not failed.total:
        return ""
    base = view_base(report.view_url) if report.view_url else None
    rows = []
    for f in failed.listed:
        test = escape(f.test)
        if base is not None:
            test = f"<a href='{escape(view_link(base, f), quote=True)}'>{test}</a>"
        kind = f.failure_type or ("errored" if f.status == "errored" else "failed")
        rows.append(
            f"<tr><td>{escape(f.model)}</td><td>{test}</td><td class=n>{f.epoch}</td><td>{escape(kind)}</td>"
            f"<td>{escape(f.run)}</td></tr>"
        )
    more = failed.total - len(failed.listed)
    notes = f"<p class='note'>{more} more not listed.</p>" if more else ""
    if base is None:
        notes += (
            "<p class='note'>Give bench report --view-url URL (the address bench view printed) to link each one.</p>"
        )
    head = "".join(f"<th scope='col'>{h}</th>" for h in ("model", "test", "epoch", "failure", "run"))
    return (
        f"<h2 id='failed-tests'>Failed tests ({failed.total})</h2><table class='failed'><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>{notes}"
    )


def render(report: Report) -> str:
    warnings = "".join(f"<p class='warn'><strong>Warning:</strong> {escape(w)}</p>" for w in report.warnings)
    figures = "".join(charts(report))
    tables = "".join(html_table(s) for s in sections(report)) + failed_list(report)
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>bench report: {escape(report.source)}</title><style>{CSS}</style></head><body>"
        f"<h1>bench report</h1><p class='note'>{escape(report.source)}</p>{warnings}"
        f"<section class='charts' aria-label='Charts'>{figures}</section>{tables}</body></html>\n"
    )
