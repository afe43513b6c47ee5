"""How long an exchange takes to appear on `bench view --follow`'s live page after it ended, while a recording is in
progress: a real `bench proxy` recording from a paced upstream (tests/support/upstream.py), a `bench view --follow`
process of its own, headless Chromium on the live page, and N streamed requests sent one after another through the
proxy. An exchange's delay is the page's clock when it drew the row minus the client's clock when it had read the
last byte of the answer (one machine, one wall clock).

    .venv/bin/python benchmarks/view_follow.py [--exchanges 200] [--gap-ms 20] [--concurrency 1]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from tests.bench.view.browser import chromium  # noqa: E402
from tests.support.live_recording import percentile, recording_proxy, send, shown_at  # noqa: E402
from tests.support.upstream import upstream_thread  # noqa: E402


def start_view(folder: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench", "view", "--follow", str(folder), "--no-open", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("bench view: "):
            return proc, line.split()[2]
    raise RuntimeError("bench view did not start")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--exchanges", type=int, default=200)
    ap.add_argument("--gap-ms", type=float, default=20.0, help="pause between two requests of one client")
    ap.add_argument("--concurrency", type=int, default=1, help="clients sending at once")
    args = ap.parse_args()
    tests = [f"follow.t{i:04d}" for i in range(args.exchanges)]
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        folder = tmp / "cassettes"
        with (
            upstream_thread(ttft=0.02, delay=0.01, words=30) as upstream,
            recording_proxy(upstream.url, folder) as proxy,
            chromium(tmp / "profile") as driver,
        ):
            view, url = start_view(folder)
            try:
                driver.get(url)
                # Drawn after the load event (the view asks the API first).
                WebDriverWait(driver, 60).until(lambda d: d.find_elements("css selector", "#live-stats"))
                time.sleep(1)
                ended: dict[str, float] = {}

                def client(mine: list[str]) -> None:
                    for test in mine:
                        ended[test] = send(proxy.url, test)
                        time.sleep(args.gap_ms / 1000)

                t0 = time.perf_counter()
                with ThreadPoolExecutor(args.concurrency) as pool:
                    list(pool.map(client, [tests[k :: args.concurrency] for k in range(args.concurrency)]))
                sent_s = time.perf_counter() - t0
                # The page keeps its last 500 rows: read what it shows as it goes would race; the run fits in it.
                shown = shown_at(driver, tests[-500:], 120)
            finally:
                view.terminate()
                view.wait(30)
        delays = [shown[t] - ended[t] for t in tests[-500:] if t in shown]
        missing = len(tests[-500:]) - len(delays)
        print(
            f"{args.exchanges} exchanges in {sent_s:.1f} s ({args.exchanges / sent_s:.1f}/s, {args.concurrency} "
            f"client(s)); on the page after the answer's end: p50 {1000 * statistics.median(delays):.0f} ms, p90 "
            f"{1000 * percentile(delays, 0.9):.0f} ms, p99 {1000 * percentile(delays, 0.99):.0f} ms, max "
            f"{1000 * max(delays):.0f} ms; within 1 s: {sum(d <= 1.0 for d in delays)} of {len(delays)}"
            + (f"; {missing} never shown" if missing else "")
        )


if __name__ == "__main__":
    main()
