"""The HTML report rendered by a real browser (headless Chromium): every chart is drawn with a visible size."""

from __future__ import annotations

import html
import json
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from bench.scorer.report import aggregate, render_html
from bench.scorer.report.load import load
from bench.scorer.results import LoadTag
from bench.scorer.scores_io import dumps
from tests.scorer.report.factory import meta, synthetic, write_scores
from tests.scorer.test_traffic_lines import _entry

CHROMIUM = Path("/usr/bin/chromium")

# Added to a copy of the report only: the report itself carries no script. It measures what the browser laid out.
MEASURE = """<pre id="measure"></pre><script>
const out = [];
for (const svg of document.querySelectorAll("svg.chart")) {
  const box = svg.getBoundingClientRect();
  const drawn = (sel) => [...svg.querySelectorAll(sel)].filter((e) => {
    const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; }).length;
  out.push({id: svg.id, title: svg.querySelector("title").textContent, width: box.width, height: box.height,
            bars: drawn("rect.bar"), whiskers: drawn("path.whisker"), boxes: drawn("rect.box"),
            lines: drawn("polyline.cdf"), segments: drawn("rect.segment"),
            series: [...svg.querySelectorAll("polyline.series")].filter((e) => {
              const r = e.getBoundingClientRect(); return r.width > 0 || r.height > 0; }).length,
            points: [...svg.querySelectorAll("circle.point")].map((e) => {
              const r = e.getBoundingClientRect(); return [e.dataset.x, r.width > 0 && r.height > 0,
                r.left >= box.left && r.right <= box.right && r.top >= box.top && r.bottom <= box.bottom]; }),
            labels: svg.querySelectorAll("text").length});
}
document.getElementById("measure").textContent = JSON.stringify(out);
</script>"""


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


def measured(page: str, tmp_path: Path) -> dict[str, dict[str, Any]]:
    """The report page laid out by headless Chromium: per chart, its size and what of it was drawn."""
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", MEASURE + "</body>"))
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [
                str(CHROMIUM),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                f"--user-data-dir={profile}",
                "--window-size=1200,900",
                "--dump-dom",
                probe.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r'<pre id="measure">(.*?)</pre>', done.stdout, re.DOTALL)
    assert found and found.group(1), "the measuring script did not run"
    return {c["id"]: c for c in json.loads(html.unescape(found.group(1)))}


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
