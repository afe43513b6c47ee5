"""How long `bench report` takes on 100,000 scored exchanges.

Generates a synthetic scores file following docs/scores-format.md (4 models, 4 suites, 7 categories, 5 epochs,
retries and errors, 50-300 inter-token gaps per exchange), then times each stage in a fresh process per format so
that imports and caches count as a user would see them: load (read + parse), aggregate, and render to table, JSON
and HTML. Prints the median of --repeat runs.

    .venv/bin/python benchmarks/report_speed.py [--results 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.scorer.report.factory import meta, synthetic, write_scores  # noqa: E402

STAGES = """
import gc, io, json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
from pathlib import Path
from rich.console import Console
from bench.scorer.report import aggregate, load
from bench.scorer.report.formats import FORMATS, Target, report_document
t1 = time.perf_counter()
scores = load.load(Path(sys.argv[1]))
t2 = time.perf_counter()
report = aggregate.build(scores)
t3 = time.perf_counter()
FORMATS[sys.argv[2]].render(report_document(report), Target())
t4, c4 = time.perf_counter(), time.process_time()
print(json.dumps({"import": t1 - t0, "load": t2 - t1, "aggregate": t3 - t2, "render": t4 - t3, "total": t4 - t0,
                  "cpu": c4 - c0}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=int, default=100_000, help="scored exchanges to generate")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scores.jsonl"
        t0 = time.perf_counter()
        results = synthetic(args.results, models=4, epochs=5)
        write_scores(path, meta(), results)
        gaps = sum(len(ex["itl_us"] or ()) for r in results for ex in r["exchanges"])
        print(
            f"generated {len(results):,} results, {gaps:,} ITL gaps, {path.stat().st_size / 1e6:.0f} MB "
            f"in {time.perf_counter() - t0:.1f} s"
        )
        del results
        print(f"{'format':<7} {'import':>7} {'load':>7} {'aggregate':>10} {'render':>7} {'total':>7} {'cpu':>7}")
        for fmt in ("table", "json", "html"):
            runs = []
            for _ in range(args.repeat):
                out = subprocess.run(
                    [sys.executable, "-c", STAGES, str(path), fmt], cwd=ROOT, capture_output=True, text=True, check=True
                )
                runs.append(json.loads(out.stdout))
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            print(
                f"{fmt:<7} {med['import']:>7.2f} {med['load']:>7.2f} {med['aggregate']:>10.2f} "
                f"{med['render']:>7.2f} {med['total']:>7.2f} {med['cpu']:>7.2f}"
            )
        for fmt in ("table", "html"):
            t = time.perf_counter()
            cmd = [sys.executable, "-m", "bench", "report", str(path), "--format", fmt, "--out", str(Path(tmp) / "o")]
            subprocess.run(cmd, cwd=ROOT, check=True)
            print(f"bench report --format {fmt} (whole command, one run): {time.perf_counter() - t:.2f} s")
        print(f"load average: {' '.join(f'{v:.1f}' for v in os.getloadavg())} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
