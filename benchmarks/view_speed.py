"""Time to first paint of `bench view`'s results table and of one result, for the shipped SmolLM2 recording and for
a synthetic run of N exchanges (100,000 by default), measured in a real headless Chromium; and the server's peak RSS.

The synthetic run is benchmarks/rescore_speed.py's cassette (half text answers, half tool calls, ~300-token streams),
rescored into a scores file. Each `bench view` server runs in its own process. For each view, a fresh page load is
timed from navigation start to the frame after the view was drawn (the `bench-view-painted` performance mark that
the page sets), in interleaved rounds (shipped, synthetic, shipped, ...); the best of the rounds is printed, with the
synthetic/shipped ratio. One result is opened twice on the synthetic run: its first exchange and its last (the
cassette is scanned until the result's exchanges are found, so the last one is the worst case).

    .venv/bin/python benchmarks/view_speed.py [--exchanges 100000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.rescore_speed import bench_catalog, build  # noqa: E402
from scorer.pipeline import rescore  # noqa: E402
from scorer.scores_io import read_scores, write_scores  # noqa: E402
from tests.bench.view.browser import chromium  # noqa: E402

SHIPPED = ROOT / "cassettes" / "smollm2-135m-catalog.cassette"


def start(scores: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench", "view", str(scores), "--no-open"], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("bench view: "):
            return proc, line.split()[2]
    raise RuntimeError("bench view did not start")


def peak_rss_mib(proc: subprocess.Popen[str]) -> float:
    status = Path(f"/proc/{proc.pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM")).split()[1]) / 1024


def painted_ms(driver: Any, url: str) -> float:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get("about:blank")
    driver.get(url)
    mark = "return performance.getEntriesByName('bench-view-painted').map(e => e.startTime)"
    WebDriverWait(driver, 300, poll_frequency=0.02).until(lambda d: d.execute_script(mark))
    if driver.find_elements("css selector", "p.error"):
        raise RuntimeError(driver.find_element("css selector", "p.error").text)
    return float(driver.execute_script(mark)[0])


def result_hash(result: dict[str, Any]) -> str:
    key = {k: result[k] for k in ("run", "model", "test", "epoch")}
    return "#/result?" + urllib.parse.urlencode(key)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--exchanges", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        shipped = tmp / "shipped"
        shipped.mkdir()
        shutil.copy(SHIPPED, shipped / SHIPPED.name)
        subprocess.run([sys.executable, "-m", "bench", "rescore", str(shipped)], check=True, capture_output=True)
        synth = tmp / "synth"
        synth.mkdir()
        t = time.perf_counter()
        build(synth / "synth.cassette", args.exchanges)
        meta, results = rescore([synth / "synth.cassette"], catalog=bench_catalog(), jobs=1)
        results = list(results)
        write_scores(synth / "scores.jsonl", meta, results)
        print(f"built and rescored {args.exchanges} synthetic exchanges in {time.perf_counter() - t:.0f} s")
        _, shipped_results = read_scores(shipped / "scores.jsonl", exchanges=False)
        views = {
            "results table": ("#/results", "#/results"),
            "one result (first)": (result_hash(shipped_results[0]), result_hash(results[0])),
            "one result (last)": (result_hash(shipped_results[-1]), result_hash(results[-1])),
        }
        servers = [start(shipped / "scores.jsonl"), start(synth / "scores.jsonl")]
        try:
            with chromium(tmp / "profile") as driver:
                best = {name: [float("inf"), float("inf")] for name in views}
                for _ in range(args.rounds):
                    for name, hashes in views.items():
                        for side, ((_, base), fragment) in enumerate(zip(servers, hashes, strict=True)):
                            best[name][side] = min(best[name][side], painted_ms(driver, base + fragment))
            print(f"{'view':<22} {'shipped (176 results)':>22} {f'synthetic ({len(results)})':>22} {'ratio':>7}")
            for name, (a, b) in best.items():
                print(f"{name:<22} {a:>19.0f} ms {b:>19.0f} ms {b / a:>6.1f}x")
            rss = [peak_rss_mib(proc) for proc, _ in servers]
            print(f"server peak RSS: shipped {rss[0]:.0f} MiB, synthetic {rss[1]:.0f} MiB ({rss[1] / rss[0]:.1f}x)")
        finally:
            for proc, _ in servers:
                proc.terminate()
                proc.wait(30)


if __name__ == "__main__":
    main()
