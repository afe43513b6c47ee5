"""The HTML report laid out by a real headless Chromium (Debian's `chromium`): what the browser drew of each chart.

A measuring script is added to a copy of the page only (the report itself carries no script); Chromium runs it and
dumps the DOM, whose `<pre id="measure">` holds, per SVG chart, its size and how many of its marks have a size.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
# Everything that would reach for the network on start is off: this machine's network is closed.
HEADLESS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)

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
            labels: svg.querySelectorAll("text").length,
            // Text the chart's own box cuts (drawn past its left or right edge): labels a reader cannot read.
            cut: [...svg.querySelectorAll("text")].filter((e) => {
              const r = e.getBoundingClientRect(); return r.left < box.left - 0.5 || r.right > box.right + 0.5; })
              .map((e) => e.textContent)});
}
document.getElementById("measure").textContent = JSON.stringify(out);
</script>"""


def measured(page: str, tmp_path: Path) -> dict[str, dict[str, Any]]:
    """The report page laid out by headless Chromium: per chart, its size and what of it was drawn."""
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", MEASURE + "</body>"))
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [
                str(CHROMIUM),
                *HEADLESS,
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
