"""The HTML report rendered by a real browser (headless Chromium): every chart is drawn with a visible size."""

from __future__ import annotations

import html
import json
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from bench.scorer.report import aggregate, render_html
from bench.scorer.report.load import load
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
    charts = {c["id"]: c for c in json.loads(html.unescape(found.group(1)))}
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
