"""A report section (a titled table of text) and the cell formats every section builder shares, so the terminal,
Markdown and HTML renderers say the same."""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.scorer.report.latency import Dist


@dataclass
class Section:
    title: str
    columns: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)
    numeric: set[int] = field(default_factory=set)  # columns aligned right


def pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def interval(low: float, high: float) -> str:
    return f"[{100 * low:.1f}, {100 * high:.1f}]"


def ms(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.0f}" if value >= 100 else f"{value:.2f}" if value < 10 else f"{value:.1f}"


def triple(dist: Dist) -> str:
    return "–" if not dist.count else f"{ms(dist.p50)} / {ms(dist.p90)} / {ms(dist.p99)}"


def rate(value: float | None) -> str:
    """Tokens per second."""
    return "–" if value is None else f"{value:.1f}"


def seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}" if value < 10 else f"{value:.1f}"
