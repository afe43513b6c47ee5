"""Full-text search in `bench view` on the synthetic run of N exchanges (100,000 by default): how long the text takes
to read in the background, what it costs in memory and on disk, and each search's time, p50 and p99.

The run is benchmarks/view_speed.py's (benchmarks/rescore_speed.py's cassette: pseudo-word answers of ~300 tokens,
half tool calls), rescored once into a scores file (`--keep DIR` keeps it for the next run). The index is opened in
this process as `bench view` opens it; the search is started and waited for; then `--queries` searches, each of
other words (no cache), are timed through the results API handler's path (text scan, then filter, sort and page of
every row): words from the run's vocabulary (common), a word of it with a prefix (rare), two words in a row, and a
word that is nowhere (a full scan with no hit).

    .venv/bin/python benchmarks/view_search.py [--exchanges 100000] [--queries 200] [--keep DIR]
"""

from __future__ import annotations

import argparse
import random
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.scorer.scores_io import write_scores  # noqa: E402
from bench.view.index import open_index  # noqa: E402
from bench.view.paging import parse_query, select  # noqa: E402
from benchmarks.rescore_speed import VOCAB, bench_catalog, build  # noqa: E402
from tests.support.rescored import rescored  # noqa: E402


def rss_mib(field: str = "VmRSS") -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def memory() -> str:
    """Resident memory now: anonymous (the process's own) and file-backed (mapped files: page cache, reclaimable)."""
    return f"RSS {rss_mib():.0f} MiB (anonymous {rss_mib('RssAnon'):.0f}, file-backed {rss_mib('RssFile'):.0f})"


def synthetic(folder: Path, exchanges: int) -> Path:
    scores = folder / "scores.jsonl"
    if not scores.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        build(folder / "synth.cassette", exchanges)
        meta, results = rescored([folder / "synth.cassette"], catalog=bench_catalog(), jobs=1)
        write_scores(scores, meta, list(results))
        print(f"built and rescored {exchanges} synthetic exchanges in {time.perf_counter() - t:.0f} s")
    return scores


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--exchanges", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--keep", type=Path, metavar="DIR", help="build the run in DIR once and reuse it")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        scores = synthetic(args.keep or Path(tmp) / "synth", args.exchanges)
        t = time.perf_counter()
        index = open_index([scores])
        print(f"index opened: {len(index.rows)} results in {time.perf_counter() - t:.1f} s, {memory()}")
        t, cpu = time.perf_counter(), time.process_time()
        search = index.search
        search.start()
        while not search.done:
            time.sleep(0.2)
        wall, used = time.perf_counter() - t, time.process_time() - cpu
        size = search._size
        print(
            f"text read: {search.read} exchanges in {wall:.1f} s wall, {used:.1f} s CPU; {size / 2**20:.0f} MiB of "
            f"text (twice, on disk: as written and lowered); then {memory()}"
        )
        rng = random.Random(7)
        kinds = {
            "a word of the run": lambda: rng.choice(VOCAB),
            "two words in a row": lambda: f"{rng.choice(VOCAB)} {rng.choice(VOCAB)}",
            "a rare word": lambda: "zq" + rng.choice(VOCAB),
            "answer: paris (every text answer)": lambda: "answer: paris",
        }
        for name, make in kinds.items():
            scans, times, totals = [], [], []
            for _ in range(args.queries // len(kinds)):
                words = make()
                search._cache.clear()  # each search scans: no query's answer is reused
                t = time.perf_counter()
                found, state = search.find(words)
                scans.append(1000 * (time.perf_counter() - t))
                rows = select(index.rows, parse_query({"q": words}), found.rows)
                times.append(1000 * (time.perf_counter() - t))
                totals.append(len(rows))
                assert state.complete
            print(
                f"{name:<30} p50 {statistics.median(times):5.0f} ms  p99 {percentile(times, 0.99):5.0f} ms  "
                f"(the scan alone: p50 {statistics.median(scans):5.0f} ms, p99 {percentile(scans, 0.99):5.0f} ms)  "
                f"results matched: median {statistics.median(totals):.0f}"
            )
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"after the searches: {memory()}; peak RSS {peak:.0f} MiB (file-backed pages of mapped files included)")


if __name__ == "__main__":
    main()
