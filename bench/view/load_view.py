"""`bench view`'s Load page: each scores source's `bench load` levels (docs/load.md), counted as `bench report`
counts them (bench.scorer.report.levels), and each metric's chart against load as an SVG image of its own (served as
`image/svg+xml`: the page shows it in an <img>, where no script of it could run)."""

from __future__ import annotations

import msgspec

from bench.scorer.report.aggregate import recorded_slo
from bench.scorer.report.latency import Dist
from bench.scorer.report.levels import Levels, LevelsTally
from bench.scorer.report.render_html import level_chart_svgs
from bench.scorer.report.slo import describe
from bench.scorer.results import Meta, Result, TrafficLine

SVG_NS = "http://www.w3.org/2000/svg"


class LoadRow(msgspec.Struct):
    level: int
    load: str
    requests: int
    warmup: int
    cooldown: int
    failed: int
    sent_per_s: float | None
    request_throughput: float | None
    output_throughput: float | None
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    itl_p50_ms: float | None
    e2el_p50_ms: float | None
    e2el_p99_ms: float | None
    goodput: float | None
    slo_attainment: float | None
    pass_rate: float | None
    late_p99_ms: float | None


class LoadSource(msgspec.Struct):
    source: int
    name: str
    slo: str
    saturation: str
    x_label: str
    charts: list[str]
    rows: list[LoadRow]


class LoadTallies:
    """Every scores source's levels, gathered as the index reads its lines."""

    def __init__(self) -> None:
        self._tallies: dict[int, LevelsTally] = {}
        self.levels: dict[int, Levels] = {}

    def source(self, source: int, meta: Meta) -> None:
        self._tallies[source] = LevelsTally(recorded_slo(meta))

    def add(self, source: int, line: Result | TrafficLine) -> None:
        tally = self._tallies[source]
        if isinstance(line, Result):
            tally.result(line)
        else:
            tally.traffic_line(line)

    def finish(self) -> None:
        for source, tally in self._tallies.items():
            found = tally.finish()
            if found is not None:
                self.levels[source] = found
        self._tallies.clear()

    def pages(self, names: list[str]) -> list[LoadSource]:
        return [page(source, names[source], levels) for source, levels in sorted(self.levels.items())]

    def chart(self, source: int, name: str) -> str | None:
        """One chart as an SVG document of its own (the namespace an <img> needs; inline SVG has it implied)."""
        levels = self.levels.get(source)
        found = None if levels is None else level_chart_svgs(levels).get(name)
        return None if found is None else found.replace("<svg ", f'<svg xmlns="{SVG_NS}" ', 1)


def _p(dist: Dist, q: str) -> float | None:
    value: float | None = getattr(dist, q)
    return value if dist.count else None


def page(source: int, name: str, levels: Levels) -> LoadSource:
    rows = [
        LoadRow(
            level=r.level, load=r.load, requests=r.requests, warmup=r.warmup, cooldown=r.cooldown, failed=r.failed,
            sent_per_s=r.sent_per_s, request_throughput=r.request_throughput, output_throughput=r.output_throughput,
            ttft_p50_ms=_p(r.timing.ttft_ms, "p50"), ttft_p99_ms=_p(r.timing.ttft_ms, "p99"),
            itl_p50_ms=_p(r.timing.itl_ms, "p50"), e2el_p50_ms=_p(r.timing.e2el_ms, "p50"),
            e2el_p99_ms=_p(r.timing.e2el_ms, "p99"), goodput=r.goodput, slo_attainment=r.slo_attainment,
            pass_rate=r.pass_rate, late_p99_ms=_p(r.lateness_ms, "p99"),
        )
        for r in levels.rows
    ]  # fmt: skip
    return LoadSource(
        source=source, name=name, slo=describe(levels.slo), saturation=levels.saturation.says,
        x_label=levels.x_label, charts=list(level_chart_svgs(levels)), rows=rows,
    )  # fmt: skip
