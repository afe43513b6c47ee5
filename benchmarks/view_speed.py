"""Time to first paint of `bench view`'s results table and of one result, for the shipped SmolLM2 recording and for
a synthetic run of N exchanges (100,000 by default), measured in a real headless Chromium; and the server's peak RSS.

The synthetic run is benchmarks/rescore_speed.py's cassette (half text answers, half tool calls, ~300-token streams),
rescored into a scores file. Each `bench view` server runs in its own process. For each view, a fresh page load is
timed from navigation start to the frame after the view was drawn (the `bench-view-painted` performance mark that
the page sets), in interleaved rounds (shipped, synthetic, shipped, ...); the best of the rounds is printed, with the
synthetic/shipped ratio. One result is opened twice on each run: the first and the last result of the scores file.
A result's exchanges are read through the cassette's seek index (bench/core/cassette/seek.py), which the first opening
builds as far as that exchange's frame: the first round's time of each view is printed too ("cold"). The time each
server takes to load its scores (start to the printed URL) is printed with its peak RSS.

    .venv/bin/python benchmarks/view_speed.py [--exchanges 100000] [--rounds 3] [--keep DIR] [--against TREE]

`--against TREE` times the synthetic run's views with this tree's server and another tree's (a worktree of main:
`git worktree add --detach /tmp/main main`) side by side in one run, in interleaved rounds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.scorer.results import Result  # noqa: E402
from bench.scorer.scores_io import read_scores, write_scores  # noqa: E402
from benchmarks.rescore_speed import bench_catalog, build  # noqa: E402
from tests.bench.view.browser import chromium  # noqa: E402
from tests.support.rescored import rescored  # noqa: E402

SHIPPED = ROOT / "cassettes" / "smollm2-135m-catalog.cassette"


def start(scores: Path, tree: Path | None = None) -> tuple[subprocess.Popen[str], str, float]:
    """`bench view SCORES` in a process of its own: this tree's code, or another tree's (`tree`: its folder first on
    the import path, as `python -m bench` from a checkout runs it)."""
    t = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(tree)} if tree is not None else None
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench", "view", str(scores), "--no-open"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tree,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("bench view: "):
            return proc, line.split()[2], time.perf_counter() - t
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


def result_hash(result: Result) -> str:
    key = {"run": result.run, "model": result.model, "test": result.test, "epoch": result.epoch}
    return "#/result?" + urllib.parse.urlencode(key)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--exchanges", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3, help="the first is reported apart (cold), best of the others")
    ap.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="build the synthetic run in DIR and keep it; a later run given the same DIR reuses it (building and "
        "rescoring 100,000 exchanges takes minutes)",
    )
    ap.add_argument(
        "--against",
        type=Path,
        metavar="TREE",
        help="time the synthetic run's views with this tree's server and TREE's (e.g. a worktree of main) side by "
        "side, in interleaved rounds, instead of shipped against synthetic",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        shipped = tmp / "shipped"
        shipped.mkdir()
        shutil.copy(SHIPPED, shipped / SHIPPED.name)
        subprocess.run([sys.executable, "-m", "bench", "rescore", str(shipped)], check=True, capture_output=True)
        synth = args.keep or tmp / "synth"
        synth.mkdir(parents=True, exist_ok=True)
        if (synth / "scores.jsonl").is_file():
            _, results = read_scores(synth / "scores.jsonl", exchanges=False)
            print(f"reusing the synthetic run in {synth}")
        else:
            t = time.perf_counter()
            build(synth / "synth.cassette", args.exchanges)
            meta, results = rescored([synth / "synth.cassette"], catalog=bench_catalog(), jobs=1)
            results = list(results)
            write_scores(synth / "scores.jsonl", meta, results)
            del meta
            print(f"built and rescored {args.exchanges} synthetic exchanges in {time.perf_counter() - t:.0f} s")
        _, shipped_results = read_scores(shipped / "scores.jsonl", exchanges=False)
        n_shipped = len(shipped_results)
        views = {
            "results table": ("#/results", "#/results"),
            "one result (first)": (result_hash(shipped_results[0]), result_hash(results[0])),
            "one result (last)": (result_hash(shipped_results[-1]), result_hash(results[-1])),
        }
        n_results = len(results)
        del results  # the benchmark's own copy: only the servers' memory is measured
        if args.against is not None:
            against(synth / "scores.jsonl", args.against, {k: v[1] for k, v in views.items()}, args.rounds, tmp)
            return
        servers = [start(shipped / "scores.jsonl"), start(synth / "scores.jsonl")]
        try:
            with chromium(tmp / "profile") as driver:
                cold: dict[str, list[float]] = {}
                best = {name: [float("inf"), float("inf")] for name in views}
                for round_ in range(args.rounds):
                    for name, hashes in views.items():
                        for side, ((_, base, _), fragment) in enumerate(zip(servers, hashes, strict=True)):
                            ms = painted_ms(driver, base + fragment)
                            if round_ == 0:
                                cold.setdefault(name, []).append(ms)
                            else:
                                best[name][side] = min(best[name][side], ms)
            heads = f"shipped ({n_shipped})", f"synthetic ({n_results})"
            print(f"{'view':<22} {heads[0]:>22} {heads[1]:>22} {'ratio':>7}   cold: shipped, synthetic")
            for name, (a, b) in best.items():
                c = cold[name]
                print(f"{name:<22} {a:>19.0f} ms {b:>19.0f} ms {b / a:>6.1f}x   {c[0]:>6.0f} ms, {c[1]:>6.0f} ms")
        finally:
            stop(servers, ["shipped", "synthetic"])


def against(scores: Path, tree: Path, views: dict[str, str], rounds: int, tmp: Path) -> None:
    """This tree's server and TREE's over the same scores: each view's first paint in every round, both servers in
    each round (the order alternating), the first round reported apart as cold."""
    servers = [start(scores), start(scores, tree)]
    names = ["this tree", str(tree)]
    try:
        times: dict[str, list[list[float]]] = {name: [[], []] for name in views}
        with chromium(tmp / "profile") as driver:
            for round_ in range(rounds):
                for name, fragment in views.items():
                    order = (0, 1) if round_ % 2 == 0 else (1, 0)
                    for side in order:
                        times[name][side].append(painted_ms(driver, servers[side][1] + fragment))
        print(f"{'view':<20} {'side':<24} {'cold':>8} {'best':>8} {'median':>8} {'spread (warm)':>18}")
        for name, sides in times.items():
            for side, values in enumerate(sides):
                warm = values[1:] or values
                print(
                    f"{name:<20} {names[side][-24:]:<24} {values[0]:>6.0f}ms {min(warm):>6.0f}ms "
                    f"{statistics.median(warm):>6.0f}ms {min(warm):>8.0f}-{max(warm):.0f} ms"
                )
            ratio = statistics.median(sides[0][1:] or sides[0]) / statistics.median(sides[1][1:] or sides[1])
            print(f"{'':<20} this tree / {names[1][-20:]}: {ratio:.2f}x (medians, warm)")
    finally:
        stop(servers, names)


def stop(servers: list[tuple[subprocess.Popen[str], str, float]], names: list[str]) -> None:
    """Each server's peak RSS and start time (scores loaded), then the servers stopped."""
    for (proc, _, started), name in zip(servers, names, strict=True):
        print(f"server {name}: peak RSS {peak_rss_mib(proc):.0f} MiB, start (scores loaded) {started:.1f} s")
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()
