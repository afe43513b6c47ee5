"""How fast `bench record` is: the built-in catalog, 3 models x 3 epochs, against the simulator.

Two runs, side by side in one process:
  1. the simulator with no delay: the wall time is the driver's (and proxy's, and tools') own cost;
  2. the simulator at 50 tokens/s per stream: the wall time should be bound by the simulator, not by bench.
The ideal (simulator-bound) time of run 2 is the sum of every request's streaming time at 50 tokens/s divided by the
concurrency; the ratio wall / ideal says how much bench adds on top (1.0 = nothing).

    .venv/bin/python benchmarks/record_speed.py [--tps 50] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.catalog.driver.config import RecordConfig
from bench.catalog.driver.record_run import record
from bench.catalog.sim import start_sim
from bench.core.cassette import read_cassette
from bench.core.parse import parse_exchange
from bench.scorer.checked_catalog import load_catalog

MODELS = ["oracle", "flawed-no-call", "flawed-wrong-args"]
EPOCHS = 3


async def one(tps: float, concurrency: int) -> tuple[float, int, float]:
    catalog = load_catalog(None)
    with tempfile.TemporaryDirectory() as out:
        async with await start_sim(catalog=catalog, tokens_per_second=tps) as sim:
            cfg = RecordConfig(upstream=sim.url, models=MODELS, epochs=EPOCHS, out=out, concurrency=concurrency)
            summary = await record(cfg, catalog)
        assert summary.cassette is not None and summary.errors == 0
        _, exchanges = read_cassette(summary.cassette)
        # The simulator sends the role frame at once, then one event per token every 1/tps seconds.
        busy = sum((parse_exchange(e).timing.n_events - 1) / tps for e in exchanges) if tps else 0.0
    return summary.elapsed, summary.requests, busy / concurrency


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tps", type=float, default=50.0)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    fast_wall, fast_n, _ = asyncio.run(one(0.0, args.concurrency))
    slow_wall, slow_n, ideal = asyncio.run(one(args.tps, args.concurrency))
    print(f"catalog x {len(MODELS)} models x {EPOCHS} epochs, concurrency {args.concurrency}")
    print(
        f"sim no delay:    {fast_wall:7.2f} s  {fast_n} requests  {fast_n / fast_wall:7.1f} req/s  (driver's own cost)"
    )
    print(f"sim {args.tps:g} tok/s:  {slow_wall:7.2f} s  {slow_n} requests  {slow_n / slow_wall:7.1f} req/s")
    print(f"ideal (simulator-bound) time at {args.tps:g} tok/s: {ideal:.2f} s; wall / ideal = {slow_wall / ideal:.3f}")


if __name__ == "__main__":
    main()
