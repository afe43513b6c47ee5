"""Page height and DOM size of one result in `bench view`, in a real headless Chromium at a given window width:
by default the demo's 5-exchange agent result (oracle, agent.fix_all), the page issue 36 measured.

    .venv/bin/python benchmarks/view_page_size.py [--width 1280] [--test agent.fix_all] [--model oracle]

Run it from two trees (this one and main's, each with its own interpreter or PYTHONPATH) to compare.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cli import main as bench_main  # noqa: E402
from bench.view.index import open_index  # noqa: E402
from tests.bench.view.browser import chromium, serve  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--test", default="agent.fix_all")
    ap.add_argument("--model", default="oracle")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        assert bench_main(["demo", "--out", str(tmp / "demo"), "--quiet"]) == 0
        (scores,) = (tmp / "demo").glob("*.scores.jsonl")
        index = open_index([scores])
        row = next(r for r in index.rows if r.test == args.test and r.model == args.model)
        exchanges = len(index.result(row.n).exchanges)
        key = {"run": row.run, "model": row.model, "test": row.test, "epoch": row.epoch}
        with serve(index) as base, chromium(tmp / "profile") as driver:
            from selenium.webdriver.support.ui import WebDriverWait

            driver.set_window_size(args.width, 1000)
            driver.get(base + "#/result?" + urllib.parse.urlencode(key))
            mark = "return performance.getEntriesByName('bench-view-painted').length"
            WebDriverWait(driver, 120, poll_frequency=0.05).until(lambda d: d.execute_script(mark))
            height = driver.execute_script("return document.documentElement.scrollHeight")
            nodes = driver.execute_script("return document.getElementsByTagName('*').length")
            turns = driver.execute_script("return document.querySelectorAll('.turn').length")
        print(
            f"{args.model} {args.test}: {exchanges} exchanges, width {args.width} px: page height {height} px, "
            f"{nodes} DOM elements, {turns} message blocks"
        )


if __name__ == "__main__":
    main()
