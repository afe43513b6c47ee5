"""Recorded client traffic replayed on schedule: how late does `bench load --replay-traffic` send each request?
(docs/load.md, "What it sends"; the figures in docs/measurements/2026-12-03-load.md)

Records --runs OpenAI Agents SDK runs (Responses API, streamed, two tools) and as many instructor extractions (a
forced tool call), started --gap seconds apart, through `bench proxy` against one simulator; then replays the
recording with `bench load --replay-traffic` at --speed to a second simulator (another TTFT) and to a third, and
prints for each replay the send lateness p50 / p99 / max (the generator's own stamps) and `bench compare` of the two
replays' E2EL and TTFT.

    flock /tmp/bench-quiet.lock python benchmarks/load_replay.py --runs 20 --gap 0.25 --speed 1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.catalog.sim import start_sim  # noqa: E402
from bench.core.cassette import CassetteReader, find_cassettes  # noqa: E402
from bench.proxy.server import start_proxy  # noqa: E402
from tests.e2e.test_agents_sdk import run_agent  # noqa: E402
from tests.e2e.test_load_replay_clients import instructor_run  # noqa: E402


async def record(folder: Path, runs: int, gap: float) -> None:
    sim = await start_sim(catalog=None, ttft_ms=20, tokens_per_second=200)
    # Once straight to the simulator first: the clients' first call imports and builds a lot (over a second with the
    # event loop blocked), which would bunch the recorded schedule.
    await asyncio.gather(run_agent(sim.base_url, streamed=True), instructor_run(sim.base_url))
    async with sim, await start_proxy(upstream=sim.url, cassettes=folder) as proxy:
        base = proxy.url + "/v1"

        async def both(i: int) -> None:
            await asyncio.sleep(i * gap)
            await asyncio.gather(run_agent(base, streamed=True), instructor_run(base))

        await asyncio.gather(*(both(i) for i in range(runs)))


def replay(url: str, recordings: Path, out: Path, speed: float) -> list[float]:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "load", "--upstream", url, "--replay-traffic", str(recordings), "--speed",
         str(speed), "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    print(done.stderr.strip().splitlines()[-1])
    return [int(e.tags["late"]) / 1000 for p in find_cassettes([out]) for e in CassetteReader(p)]


async def backends(recordings: Path, work: Path, speed: float) -> dict[str, list[float]]:
    late: dict[str, list[float]] = {}
    a = await start_sim(catalog=None, ttft_ms=20, tokens_per_second=200)
    b = await start_sim(catalog=None, ttft_ms=80, tokens_per_second=100)
    async with a, b:
        for name, sim in (("a", a), ("b", b)):
            late[name] = await asyncio.to_thread(replay, sim.url, recordings, work / name, speed)
    return late


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--gap", type=float, default=0.25)
    parser.add_argument("--speed", type=float, default=1.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        asyncio.run(record(work / "recorded", args.runs, args.gap))
        requests = sum(1 for p in find_cassettes([work / "recorded"]) for _ in CassetteReader(p))
        late = asyncio.run(backends(work / "recorded", work, args.speed))
        compare = subprocess.run(
            [sys.executable, "-m", "bench", "compare", str(work / "a"), str(work / "b"), "--format", "json"],
            cwd=ROOT, capture_output=True, text=True, check=True,
        )  # fmt: skip
    print(f"{requests} recorded requests ({args.runs} Agents SDK runs and {args.runs} instructor extractions, "
          f"{args.gap:g} s apart), replayed at speed {args.speed:g}")  # fmt: skip
    for name, values in late.items():
        arr = np.asarray(values)
        p50, p99 = np.percentile(arr, [50, 99])
        print(f"backend {name}: send lateness p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {arr.max():.2f} ms "
              f"over {arr.size} requests")  # fmt: skip
    for d in json.loads(compare.stdout)["levels"]["deltas"]:
        if d["metric"] in ("TTFT p50", "E2EL p50", "E2EL p99", "request throughput", "error rate"):
            interval = f"[{d['low']:+.2f}, {d['high']:+.2f}]" if d["low"] is not None else ""
            print(f"  {d['metric']:20} A {d['a']:9.2f}  B {d['b']:9.2f}  B-A {d['delta']:+9.2f} {interval}")


if __name__ == "__main__":
    main()
