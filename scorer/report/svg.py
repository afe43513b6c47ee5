"""Inline SVG charts for the HTML report: no script, no external resource, readable by screen readers.

Colours are the Okabe-Ito palette, distinguishable with the common colour-vision deficiencies; every chart has a
<title>, a <desc>, axis labels and a legend in words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
OTHER = "#999999"
FONT = 12
LABEL_W = 190  # room for category and model names left of the plot, at least
MAX_LABEL_W = 520  # and at most (pages are 1100 px wide): a longer name is shortened in the middle (whole: tooltip)
# Names left of a plot are set in a monospace font, so that the room they need is known here: 7.2 px a character at
# 12 px in DejaVu Sans Mono and its kin (a proportional font's widths vary from 3 to 11 px with the letters).
LABEL_FONT = "ui-monospace, 'DejaVu Sans Mono', monospace"
CHAR_W = 7.3
PLOT_W = 520
RIGHT = 30


def label_room(names: list[str]) -> int:
    """The width left of the plot that the longest name needs, within LABEL_W..MAX_LABEL_W."""
    longest = max((len(n) for n in names), default=0)
    return int(min(MAX_LABEL_W, max(LABEL_W, longest * CHAR_W + 16)))


def fit(name: str, room: float) -> str:
    """The name, or its start and end around an ellipsis, in `room` pixels."""
    chars = int((room - 16) / CHAR_W)
    if len(name) <= chars:
        return name
    keep = max(chars - 1, 2)
    return name[: (keep + 1) // 2] + "…" + name[len(name) - keep // 2 :]


def colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def nice_ticks(high: float, count: int = 5) -> list[float]:
    """0 .. a round number >= high in steps of 1, 2 or 5 x 10^n."""
    if high <= 0 or not math.isfinite(high):
        return [0.0, 1.0]
    raw = high / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    n = math.ceil(high / step - 1e-9)
    return [round(i * step, 10) for i in range(n + 1)]


def tick_label(value: float) -> str:
    return f"{value:g}"


@dataclass
class Chart:
    """An SVG being assembled: a title, a plot area of known geometry, and a body of elements."""

    ident: str
    title: str
    desc: str
    width: int
    height: int

    def __post_init__(self) -> None:
        self.body: list[str] = []

    def add(self, element: str) -> None:
        self.body.append(element)

    def text(self, x: float, y: float, s: str, *, anchor: str = "start", size: int = FONT, extra: str = "") -> None:
        self.add(f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}"{extra}>{escape(s)}</text>')

    def label(self, right: float, y: float, name: str, room: float) -> None:
        """A name ending at `right`, shortened to fit `room` (the whole name as its tooltip when it is)."""
        shown = fit(name, room)
        tip = f"<title>{escape(name)}</title>" if shown != name else ""
        self.add(
            f'<text x="{right:.1f}" y="{y:.1f}" font-size="{FONT}" font-family="{LABEL_FONT}" text-anchor="end">'
            f"{tip}{escape(shown)}</text>"
        )

    def svg(self) -> str:
        head = (
            f'<svg id="{self.ident}" class="chart" role="img" '
            f'width="{self.width}" height="{self.height}" viewBox="0 0 {self.width} {self.height}" '
            f'aria-labelledby="{self.ident}-t {self.ident}-d" font-family="system-ui, sans-serif">'
            f'<title id="{self.ident}-t">{escape(self.title)}</title>'
            f'<desc id="{self.ident}-d">{escape(self.desc)}</desc>'
        )
        return head + "".join(self.body) + "</svg>"


def x_axis(
    chart: Chart,
    x0: float,
    y: float,
    ticks: list[float],
    scale: float,
    label: str,
    top: float,
    start: float | None = None,
) -> None:
    """Ticks, grid lines up to `top`, tick labels and the axis label below y; value v sits at x0 + v * scale, and the
    axis line begins at `start` (default x0: an axis from 0)."""
    left = x0 if start is None else start
    chart.add(f'<line x1="{left}" y1="{y}" x2="{left + PLOT_W}" y2="{y}" stroke="#333"/>')
    for t in ticks:
        x = x0 + t * scale
        chart.add(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{y}" stroke="#ddd"/>')
        chart.text(x, y + 15, tick_label(t), anchor="middle", size=11)
    chart.text(left + PLOT_W / 2, y + 34, label, anchor="middle")


def legend(chart: Chart, x: float, y: float, names: list[str], colours: list[str]) -> None:
    """A horizontal legend, wrapping when a row is full."""
    cx, cy = x, y
    for name, fill in zip(names, colours, strict=True):
        w = 22 + 7 * len(name)
        if cx + w > chart.width - 10 and cx > x:
            cx, cy = x, cy + 18
        chart.add(f'<rect x="{cx:.1f}" y="{cy - 10:.1f}" width="12" height="12" fill="{fill}"/>')
        chart.text(cx + 16, cy, name, size=11)
        cx += w


def legend_height(names: list[str], width: int, x: float) -> int:
    rows, cx = 1, x
    for name in names:
        w = 22 + 7 * len(name)
        if cx + w > width - 10 and cx > x:
            rows, cx = rows + 1, x
        cx += w
    return rows * 18


def pass_rate_chart(
    ident: str,
    title: str,
    groups: list[str],
    models: list[str],
    cells: dict[tuple[str, str], tuple[float, float, float]],
) -> str:
    """Grouped horizontal bars: per group (category), one bar per model at its pass rate, whiskers at its interval."""
    bar, gap = 14, 10
    left = label_room(groups)
    top = 30 + legend_height(models, left + PLOT_W + RIGHT, left)
    group_h = bar * len(models) + gap
    height = top + group_h * len(groups) + 50
    chart = Chart(ident, title, _pass_desc(groups, models, cells), left + PLOT_W + RIGHT, height)
    chart.text(10, 18, title, size=14, extra=' font-weight="bold"')
    legend(chart, left, 40, models, [colour(i) for i in range(len(models))])
    scale = PLOT_W / 100
    axis_y = top + group_h * len(groups)
    x_axis(chart, left, axis_y, [0, 20, 40, 60, 80, 100], scale, "pass rate (%), whiskers: 95% Wilson interval", top)
    for g, group in enumerate(groups):
        y0 = top + g * group_h + gap / 2
        chart.label(left - 8, y0 + bar * len(models) / 2 + 4, group, left)
        for m, model in enumerate(models):
            if (group, model) not in cells:
                continue
            rate, low, high = cells[(group, model)]
            y = y0 + m * bar
            w = max(rate * 100 * scale, 0.5)
            tip = escape(f"{model} · {group}: {100 * rate:.1f}% [{100 * low:.1f}, {100 * high:.1f}]")
            chart.add(
                f'<rect class="bar" x="{left}" y="{y:.1f}" width="{w:.1f}" height="{bar - 2}" fill="{colour(m)}">'
                f"<title>{tip}</title></rect>"
            )
            xl, xh, ym = left + low * 100 * scale, left + high * 100 * scale, y + (bar - 2) / 2
            chart.add(
                f'<path class="whisker" d="M{xl:.1f},{ym:.1f}H{xh:.1f}M{xl:.1f},{ym - 4:.1f}v8'
                f'M{xh:.1f},{ym - 4:.1f}v8" stroke="#222" stroke-width="1.2" fill="none"/>'
            )
    return chart.svg()


def _pass_desc(groups: list[str], models: list[str], cells: dict[tuple[str, str], tuple[float, float, float]]) -> str:
    parts = [
        f"{model} in {group}: {100 * cells[(group, model)][0]:.0f}%"
        for group in groups
        for model in models
        if (group, model) in cells
    ]
    return "Pass rate per category and model. " + "; ".join(parts[:60])


def box_chart(ident: str, title: str, unit: str, rows: list[tuple[str, list[float]]]) -> str:
    """One horizontal box per model: whiskers p5..p95, box p25..p75, a line at the median."""
    rows = [(name, box) for name, box in rows if len(box) == 5]
    left = label_room([name for name, _ in rows])
    bar = 22
    top = 30
    height = top + bar * len(rows) + 50
    chart = Chart(
        ident,
        title,
        f"{title}. " + "; ".join(f"{n}: median {b[2]:.1f} {unit}, p5 {b[0]:.1f}, p95 {b[4]:.1f}" for n, b in rows),
        left + PLOT_W + RIGHT,
        height,
    )
    chart.text(10, 18, title, size=14, extra=' font-weight="bold"')
    high = max((b[4] for _, b in rows), default=1.0)
    ticks = nice_ticks(high)
    scale = PLOT_W / ticks[-1]
    axis_y = top + bar * len(rows)
    x_axis(chart, left, axis_y, ticks, scale, f"{unit} (box: p25-p75, line: median, whiskers: p5-p95)", top)
    for i, (name, (p5, p25, p50, p75, p95)) in enumerate(rows):
        y = top + i * bar + 3
        mid = y + (bar - 6) / 2
        chart.label(left - 8, mid + 4, name, left)
        x = [left + v * scale for v in (p5, p25, p50, p75, p95)]
        chart.add(f'<path d="M{x[0]:.1f},{mid:.1f}H{x[1]:.1f}M{x[3]:.1f},{mid:.1f}H{x[4]:.1f}" stroke="#333"/>')
        chart.add(
            f'<rect class="box" x="{x[1]:.1f}" y="{y:.1f}" width="{max(x[3] - x[1], 1):.1f}" height="{bar - 6}" '
            f'fill="{colour(i)}" fill-opacity="0.8" stroke="#333"><title>{escape(f"{name}: median {p50:.2f} {unit}")}'
            "</title></rect>"
        )
        chart.add(
            f'<line x1="{x[2]:.1f}" y1="{y:.1f}" x2="{x[2]:.1f}" y2="{y + bar - 6:.1f}" '
            'stroke="#000" stroke-width="2"/>'
        )
    return chart.svg()


def cdf_chart(ident: str, title: str, unit: str, series: list[tuple[str, list[float]]], qs: list[float]) -> str:
    """Cumulative distribution per model from its percentiles: x the latency, y the share of values below it."""
    series = [(name, pts) for name, pts in series if pts]
    plot_h = 220
    top = 30 + legend_height([n for n, _ in series], LABEL_W + PLOT_W + RIGHT, LABEL_W)
    height = top + plot_h + 50
    chart = Chart(
        ident,
        title,
        f"{title}. " + "; ".join(f"{n}: median {pts[len(pts) // 2]:.1f} {unit}" for n, pts in series),
        LABEL_W + PLOT_W + RIGHT,
        height,
    )
    chart.text(10, 18, title, size=14, extra=' font-weight="bold"')
    legend(chart, LABEL_W, 40, [n for n, _ in series], [colour(i) for i in range(len(series))])
    # The top percentile is the maximum, often an outlier that would squash the curve: cut the axis at p99-ish.
    high = max((pts[-2] if len(pts) > 1 else pts[-1] for _, pts in series), default=1.0)
    ticks = nice_ticks(high)
    scale = PLOT_W / ticks[-1]
    axis_y = top + plot_h
    x_axis(chart, LABEL_W, axis_y, ticks, scale, unit, top)
    chart.add(f'<line x1="{LABEL_W}" y1="{top}" x2="{LABEL_W}" y2="{axis_y}" stroke="#333"/>')
    for q in (0, 25, 50, 75, 100):
        y = axis_y - q / 100 * plot_h
        chart.text(LABEL_W - 6, y + 4, f"{q}%", anchor="end", size=11)
    chart.text(
        LABEL_W - 45,
        top + plot_h / 2,
        "share of values ≤ x",
        anchor="middle",
        extra=_rotate(LABEL_W - 45, top + plot_h / 2),
    )
    for i, (name, pts) in enumerate(series):
        coords = " ".join(
            f"{LABEL_W + min(v, ticks[-1]) * scale:.1f},{axis_y - q / 100 * plot_h:.1f}"
            for v, q in zip(pts, qs, strict=True)
        )
        chart.add(
            f'<polyline class="cdf" points="{coords}" fill="none" stroke="{colour(i)}" stroke-width="2.5">'
            f"<title>{escape(name)}</title></polyline>"
        )
    return chart.svg()


def _rotate(x: float, y: float) -> str:
    return f' transform="rotate(-90 {x:.1f} {y:.1f})"'


def stacked_chart(
    ident: str,
    title: str,
    models: list[str],
    counts: dict[str, dict[str, int]],
    axis: str = "failed or errored results",
    empty: str = "no failures",
) -> str:
    """One horizontal bar per model, split by failure type; the legend names the types in bar order."""
    totals: dict[str, int] = {}
    for per_model in counts.values():
        for kind, n in per_model.items():
            totals[kind] = totals.get(kind, 0) + n
    kinds = sorted(totals, key=lambda k: (-totals[k], k))
    # More kinds than distinguishable colours: the rarest share one grey "other".
    shown = kinds[: len(PALETTE) - 1] if len(kinds) > len(PALETTE) else kinds
    names = shown + (["other"] if len(kinds) > len(shown) else [])
    fills = [colour(i) for i in range(len(shown))] + ([OTHER] if len(names) > len(shown) else [])
    bar = 24
    left = label_room(models)
    top = 30 + legend_height(names, left + PLOT_W + RIGHT, left)
    height = top + bar * len(models) + 50
    desc = "; ".join(
        f"{m}: " + ", ".join(f"{k} {n}" for k, n in counts.get(m, {}).items()) for m in models if counts.get(m)
    )
    chart = Chart(ident, title, f"{title}. {desc or empty}", left + PLOT_W + RIGHT, height)
    chart.text(10, 18, title, size=14, extra=' font-weight="bold"')
    legend(chart, left, 40, names, fills)
    high = max((sum(counts.get(m, {}).values()) for m in models), default=0)
    ticks = nice_ticks(max(high, 1))
    scale = PLOT_W / ticks[-1]
    axis_y = top + bar * len(models)
    x_axis(chart, left, axis_y, ticks, scale, axis, top)
    for i, model in enumerate(models):
        y = top + i * bar + 3
        chart.label(left - 8, y + bar / 2, model, left)
        x = float(left)
        per_model = counts.get(model, {})
        for name, fill in zip(names, fills, strict=True):
            n = per_model.get(name, 0) if name != "other" else sum(v for k, v in per_model.items() if k not in shown)
            if not n:
                continue
            w = n * scale
            chart.add(
                f'<rect class="segment" x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{bar - 6}" fill="{fill}" '
                f'stroke="#fff"><title>{escape(f"{model}: {name} {n}")}</title></rect>'
            )
            x += w
    return chart.svg()


def axis_range(low: float, high: float) -> tuple[float, list[float]]:
    """Ticks for values from low to high: from 0, unless the values sit far from it (all above half the highest), when
    the axis starts at a round number below the lowest so that close values stay apart."""
    if low <= 0 or low < high / 2:
        return 0.0, nice_ticks(high)
    ticks = nice_ticks(high - low)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else high
    start = math.floor(low / step) * step
    n = math.ceil((high - start) / step - 1e-9)
    return start, [round(start + k * step, 10) for k in range(max(n, 1) + 1)]


# A point of a series: x, y, and whether the series' line runs through it (a level of another kind than the run's
# main one, such as a sweep's synchronous and throughput levels among its rates, is marked, hollow, but not joined).
Point = tuple[float, float, bool]


def line_chart(ident: str, title: str, x_label: str, y_label: str, series: list[tuple[str, list[Point]]]) -> str:
    """One line per series through its joined points, every point marked and titled with its values: a metric
    against load."""
    series = [(name, sorted(pts)) for name, pts in series if pts]
    plot_h = 220
    top = 30 + legend_height([n for n, _ in series], LABEL_W + PLOT_W + RIGHT, LABEL_W)
    height = top + plot_h + 50
    desc = "; ".join(f"{name}: " + ", ".join(f"{x:g} → {y:.3g}" for x, y, _ in pts[:12]) for name, pts in series)
    chart = Chart(ident, title, f"{title}, {y_label} against {x_label}. {desc}", LABEL_W + PLOT_W + RIGHT, height)
    chart.text(10, 18, title, size=14, extra=' font-weight="bold"')
    legend(chart, LABEL_W, 40, [n for n, _ in series], [colour(i) for i in range(len(series))])
    xs = [x for _, pts in series for x, _, _ in pts] or [1.0]
    x0, x_ticks = axis_range(min(xs), max(xs))
    y_ticks = nice_ticks(max((y for _, pts in series for _, y, _ in pts), default=1.0))
    x_scale, y_scale = PLOT_W / ((x_ticks[-1] - x0) or 1.0), plot_h / y_ticks[-1]
    axis_y = top + plot_h
    x_axis(chart, LABEL_W - x0 * x_scale, axis_y, x_ticks, x_scale, x_label, top, start=LABEL_W)
    chart.add(f'<line x1="{LABEL_W}" y1="{top}" x2="{LABEL_W}" y2="{axis_y}" stroke="#333"/>')
    for t in y_ticks:
        y = axis_y - t * y_scale
        chart.add(f'<line x1="{LABEL_W}" y1="{y:.1f}" x2="{LABEL_W + PLOT_W}" y2="{y:.1f}" stroke="#eee"/>')
        chart.text(LABEL_W - 6, y + 4, tick_label(t), anchor="end", size=11)
    chart.text(LABEL_W - 55, top + plot_h / 2, y_label, anchor="middle", extra=_rotate(LABEL_W - 55, top + plot_h / 2))
    for i, (name, pts) in enumerate(series):
        coords = [(LABEL_W + (x - x0) * x_scale, axis_y - y * y_scale) for x, y, _ in pts]
        path = " ".join(f"{px:.1f},{py:.1f}" for (px, py), (_, _, joined) in zip(coords, pts, strict=True) if joined)
        chart.add(
            f'<polyline class="series" points="{path}" fill="none" stroke="{colour(i)}" stroke-width="2.5">'
            f"<title>{escape(name)}</title></polyline>"
        )
        for (x, y, joined), (px, py) in zip(pts, coords, strict=True):
            fill = colour(i) if joined else "#fff"
            chart.add(
                f'<circle class="point" cx="{px:.1f}" cy="{py:.1f}" r="4" fill="{fill}" stroke="{colour(i)}" '
                f'stroke-width="2" data-x="{x:g}" data-y="{y:.6g}"><title>{escape(f"{name}: {y:.4g} at {x:g}")}'
                "</title></circle>"
            )
    return chart.svg()
