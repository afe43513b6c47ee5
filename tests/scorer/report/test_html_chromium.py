"""The HTML report rendered by a real browser (headless Chromium): every chart is drawn with a visible size."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.scorer.report import aggregate, render_html
from bench.scorer.report.load import load
from bench.scorer.results import LoadTag
from bench.scorer.scores_io import dumps
from tests.scorer.report.factory import meta, synthetic, write_scores
from tests.scorer.test_traffic_lines import _entry
from tests.support.chromium import CHROMIUM, measured


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium package (/usr/bin/chromium) to render")
def test_charts_are_drawn_in_a_browser(tmp_path: Path) -> None:
    scores = write_scores(tmp_path / "scores.jsonl", meta(), synthetic(600, models=3, epochs=2))
    # Traffic lines of three endpoints and two clients, one of them failing: the traffic charts.
    traffic = [
        _entry(i, "fp_a", endpoint=endpoint, client=client, status=status)
        for i, (endpoint, client, status) in enumerate(
            [("chat.completions", "curl", 200), ("chat.completions", "curl", 500)] * 5
            + [("responses", "OpenAI/Python", 200)] * 4
            + [("embeddings", "OpenAI/Python", 200)] * 3
        )
    ]
    with scores.open("ab") as fh:
        fh.writelines(dumps(t) for t in traffic)
    report = aggregate.build(load(scores))
    assert len(report.traffic.rows) == 3
    page = render_html.render(report)
    charts = measured(page, tmp_path)
    assert set(charts) >= {"chart-pass", "chart-box-0", "chart-box-2", "chart-cdf-itl_ms", "chart-failures"}
    for chart in charts.values():
        assert chart["width"] > 300 and chart["height"] > 80, chart
        assert chart["title"] and chart["labels"] >= 5, chart
    # One bar and one whisker per (model, category) with a pass rate.
    cells = sum(1 for r in report.rates if r.scope == "category" and r.pass_rate is not None)
    assert cells >= 12
    assert charts["chart-pass"]["bars"] == cells and charts["chart-pass"]["whiskers"] == cells
    assert charts["chart-box-0"]["boxes"] == 3
    assert charts["chart-cdf-ttft_ms"]["lines"] == 3
    assert charts["chart-failures"]["segments"] >= 3
    # Requests by status: one segment per (group, status); E2EL and TTFT boxes per traffic group.
    assert charts["chart-traffic-status"]["segments"] == 4
    assert charts["chart-traffic-e2el"]["boxes"] == 3
    assert charts["chart-traffic-ttft"]["boxes"] == 3


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium package (/usr/bin/chromium) to render")
def test_load_level_charts_are_drawn_in_a_browser(tmp_path: Path) -> None:
    scores = write_scores(tmp_path / "scores.jsonl", meta(), [])
    # Four rate levels of five exchanges each, one failing at the highest rate.
    lines = [
        _entry(i, "fp", started=1_700_000_000_000_000 + i * 100_000, end_us=50_000 * (i % 5 + 1),
               load=LoadTag(level=i // 5, load=f"rate={2 ** (i // 5)}", late_us=100 * i),
               status=500 if i == 19 else 200, failed=i == 19)
        for i in range(20)
    ]  # fmt: skip
    with scores.open("ab") as fh:
        fh.writelines(dumps(t) for t in lines)
    report = aggregate.build(load(scores), slo={"e2el": 120.0})
    assert report.levels is not None and len(report.levels.rows) == 4
    charts = measured(render_html.render(report), tmp_path)
    ids = ["throughput", "tokens", "ttft", "itl", "e2el", "shares", "late"]
    assert {f"chart-load-{k}" for k in ids} <= set(charts)
    for k in ids:
        chart = charts[f"chart-load-{k}"]
        assert chart["width"] > 300 and chart["height"] > 80 and chart["series"] >= 1, chart
        # One point per level and series, each drawn with a size and inside its chart, at the levels' rates.
        assert chart["points"] and all(drawn and inside for _, drawn, inside in chart["points"]), chart
        assert {x for x, _, _ in chart["points"]} == {"1", "2", "4", "8"}, chart
    assert len(charts["chart-load-ttft"]["points"]) == 8  # p50 and p99 at four levels


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium package (/usr/bin/chromium) to render")
def test_long_names_are_never_cut_by_the_chart(tmp_path: Path) -> None:
    """Traffic groups, models and categories with long names (as "chat.completions · flawed-invalid-json · Python
    aiohttp" was cut to "ed-invalid-json · Python aiohttp"): the label column grows to fit them, and past its
    largest a name is shortened in the middle, the whole name its tooltip."""
    huge = "a-model-name-" + "x" * 200 + "-end"
    scores = write_scores(tmp_path / "scores.jsonl", meta(), synthetic(60, models=2, epochs=1))
    traffic = [
        _entry(i, "fp", model=model, client="Python/3.11 aiohttp/3.14.5", status=200 + 300 * (i % 2))
        for i, model in enumerate(["flawed-invalid-json", "flawed-invalid-json", huge, huge])
    ]
    with scores.open("ab") as fh:
        fh.writelines(dumps(t) for t in traffic)
    page = render_html.render(aggregate.build(load(scores)))
    charts = measured(page, tmp_path)
    assert {"chart-traffic-status", "chart-traffic-e2el", "chart-pass", "chart-failures"} <= set(charts)
    for chart in charts.values():
        assert chart["cut"] == [], (chart["id"], chart["cut"])
    assert ">chat.completions · flawed-invalid-json · Python/3.11 aiohttp/3.14.5</text>" in page  # whole, fits
    assert f"<title>chat.completions · {huge} · Python/3.11 aiohttp/3.14.5</title>" in page  # shortened: tooltip
