"""A load run's levels as tables: throughput and goodput, latency, errors; the saturation point in a note."""

from __future__ import annotations

from bench.scorer.report.cells import Section, interval, ms, pct, triple
from bench.scorer.report.levels import LevelRow, Levels
from bench.scorer.report.levels_compare import LevelDelta
from bench.scorer.report.slo import describe


def rate(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _requests(r: LevelRow) -> str:
    left_out = [f"{n} {what}" for n, what in ((r.warmup, "warm-up"), (r.cooldown, "cool-down")) if n]
    return str(r.requests) + (f" (+{', '.join(left_out)})" if left_out else "")


def throughput_section(levels: Levels) -> Section:
    rows = []
    for r in levels.rows:
        passed = f"{pct(r.pass_rate)} {interval(r.pass_low, r.pass_high)}" if r.scored else "–"
        late = r.lateness_ms
        rows.append(
            [
                str(r.level), r.load, _requests(r), str(r.failed), rate(r.sent_per_s), rate(r.request_throughput),
                rate(r.output_throughput, 1), rate(r.total_throughput, 1), rate(r.goodput), pct(r.slo_attainment),
                passed, f"{ms(late.p50)} / {ms(late.p99)}" if late.count else "–",
            ]
        )  # fmt: skip
    slo = describe(levels.slo)
    notes = [
        "Measured requests only: warm-up and cool-down are recorded and counted in brackets, left out of every figure.",
        "sent/s: (n - 1) / span of the measured starts; req/s, out tok/s, total tok/s: completed requests and their "
        "tokens over the level's wall time (first measured start to last measured end), as vLLM's benchmark counts.",
        f"SLO {slo} (ms; change it with bench report --slo): goodput = completed requests within every bound per "
        "second of wall time; attained = within the SLO / requests (a failed request never is). Without an SLO every "
        "completed request counts.",
        "pass rate: the catalog's results sent at the level (95% Wilson interval). send late: how much after its due "
        "time the generator sent an arrival, p50 / p99 ms.",
    ]
    if levels.saturation.says:
        notes.append(f"Saturation: {levels.saturation.says}.")
    return Section(
        "Load levels: throughput",
        ["level", "load", "requests", "failed", "sent/s", "req/s", "out tok/s", "total tok/s", "goodput/s",
         "SLO attained", "pass rate", "send late ms"],
        rows,
        notes,
        numeric={0, 2, 3, 4, 5, 6, 7, 8, 9, 11},
    )  # fmt: skip


def latency_section(levels: Levels) -> Section:
    rows = [
        [
            str(r.level), r.load, triple(r.timing.ttft_ms), triple(r.timing.tpot_ms), triple(r.timing.itl_ms),
            triple(r.timing.e2el_ms),
        ]
        for r in levels.rows
    ]  # fmt: skip
    return Section(
        "Load levels: latency",
        ["level", "load", "TTFT ms", "TPOT ms", "ITL ms", "E2EL ms"],
        rows,
        ["Milliseconds, p50 / p90 / p99, over each level's measured requests (definitions: the Timing table)."],
        numeric={0, 2, 3, 4, 5},
    )


def errors_section(levels: Levels) -> Section:
    rows = [[str(r.level), r.load, kind, str(n)] for r in levels.rows for kind, n in r.errors.items()]
    return Section("Load levels: errors", ["level", "load", "error", "requests"], rows, numeric={0, 3})


def level_sections(levels: Levels | None) -> list[Section]:
    if levels is None:
        return []
    return [throughput_section(levels), latency_section(levels), errors_section(levels)]


def _value(unit: str, value: float | None, signed: bool = False) -> str:
    if value is None:
        return "–"
    sign = "+" if signed else ""
    if unit == "share":
        return f"{100 * value:{sign}.1f}%" if not signed else f"{100 * value:+.1f} pts"
    if unit == "ms":
        return f"{value:{sign}.2f}"
    return f"{value:{sign}.{1 if unit == 'tok/s' else 2}f}"


def compare_section(deltas: list[LevelDelta]) -> Section:
    rows = []
    for d in deltas:
        load = d.load_a if d.load_a == d.load_b else f"{d.load_a} → {d.load_b}"
        span = (
            "–"
            if d.low is None or d.high is None
            else f"[{_value(d.unit, d.low, True)}, {_value(d.unit, d.high, True)}]"
        )
        rows.append(
            [str(d.level), load, f"{d.metric} ({'%' if d.unit == 'share' else d.unit})", _value(d.unit, d.a),
             _value(d.unit, d.b), _value(d.unit, d.delta, True), span]
        )  # fmt: skip
    notes = [
        "Levels paired by number; B - A with a 95% interval: latency percentiles by bootstrap over requests, request "
        "throughput and goodput as Poisson counts over wall time, token throughput by bootstrap, shares by "
        'Newcombe\'s hybrid score interval; ITL (pooled gaps) without one (docs/load.md, "Comparing runs").'
    ]
    return Section(
        "Load levels: B against A",
        ["level", "load", "metric", "A", "B", "B - A", "95% interval"],
        rows,
        notes,
        numeric={0, 3, 4, 5},
    )
