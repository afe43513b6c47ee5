"""`bench load` against `bench sim` with known pacing: are the asked rates achieved, and do the recorded TTFT and ITL
match the simulator's configured ones within the proxy's own measured overhead? (docs/load.md, "Accuracy")

Starts `bench sim --ttft-ms T --tokens-per-second S --max-concurrency C` in its own process, runs one `bench load`
with constant-rate levels (each for --duration seconds after a 1 s warm-up), reads the cassette and `bench report
--format json`, and prints per level: asked and sent rate and their ratio, send lateness, TTFT and ITL p50/p99 next to
the configured values, and the proxy's overhead (timing.proxy_us, the proxy's own time per exchange) and event-loop
stalls (timing.loop_lag_us) over the same exchanges. Goal: sent within 2% of asked up to the generator's limit (the
first level whose lateness p99 passes 10 ms or whose sent rate falls 2% short); TTFT - T and ITL - 1/S at p50 within
the proxy's overhead plus its loop stalls at p50.

    flock /tmp/bench-quiet.lock python benchmarks/load_accuracy.py --rates 1,5,10,25,50,100,200 --duration 10
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.core.cassette import CassetteReader, find_cassettes  # noqa: E402
from tests.support.llm_server import free_port  # noqa: E402
from tests.support.sim_process import start_sim_process  # noqa: E402


def bench(*args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT, text=True, capture_output=True, **kw)  # type: ignore[call-overload,no-any-return]


async def _direct(url: str, n: int, output: int) -> tuple[list[float], list[float]]:
    """TTFT and read gaps (ms) a client measures talking to the simulator directly, one request at a time: the
    simulator's own overshoot of its configured pacing, with no proxy in the way."""
    import aiohttp

    body = {"model": "oracle", "messages": [{"role": "user", "content": "hi"}], "stream": True,
            "max_tokens": output, "ignore_eos": True}  # fmt: skip
    ttfts, gaps = [], []
    async with aiohttp.ClientSession() as session:
        for _ in range(n):
            t0 = time.perf_counter()
            async with session.post(url + "/v1/chat/completions", json=body) as resp:
                stamps = [time.perf_counter() async for _ in resp.content.iter_any()]
            ttfts.append((stamps[0] - t0) * 1000)
            # The last read is the usage chunk and [DONE], written at once after the finish frame: not a token gap.
            gaps += [(b - a) * 1000 for a, b in itertools.pairwise(stamps[:-1])]
    return ttfts[1:], gaps  # the first request pays for the connection


def proxy_overhead(folder: Path) -> dict[int, tuple[float, float]]:
    """Per level, the p50 of the proxy's own time per exchange and of its longest loop stall (ms)."""
    out: dict[int, tuple[list[int], list[int]]] = {}
    for path in find_cassettes([folder]):
        for e in CassetteReader(path):
            if e.tags.get("phase") != "measure":
                continue
            own, lag = out.setdefault(int(e.tags["level"]), ([], []))
            own.append(e.timing.proxy_us)
            lag.append(e.timing.loop_lag_us or 0)
    return {k: (float(np.median(o)) / 1000, float(np.median(g)) / 1000) for k, (o, g) in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="1,5,10,25,50,100,200")
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--ttft-ms", type=float, default=50.0)
    parser.add_argument("--tokens-per-second", type=float, default=100.0)
    parser.add_argument("--output", type=int, default=16)
    parser.add_argument("--slots", type=int, default=512)
    args = parser.parse_args()
    port = free_port()
    sim = start_sim_process(
        port, "--ttft-ms", str(args.ttft_ms), "--tokens-per-second", str(args.tokens_per_second),
        "--max-concurrency", str(args.slots),
    )  # fmt: skip
    try:
        direct_ttft, direct_gaps = asyncio.run(_direct(f"http://127.0.0.1:{port}", 21, args.output))
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "run"
            done = bench(
                "load", "--upstream", f"http://127.0.0.1:{port}", "--model", "oracle", "--rate", args.rates,
                "--arrival", "constant", "--duration", str(args.duration + 1), "--warmup", "1s",
                "--synthetic", f"input=32,output={args.output}", "--ignore-eos", "--out", str(out),
            )  # fmt: skip
            if done.returncode != 0:
                raise SystemExit(done.stderr)
            report = bench("report", str(out), "--format", "json")
            body = json.loads(report.stdout)
            overhead = proxy_overhead(out)
    finally:
        sim.terminate()
        sim.wait()
    gap = 1000 / args.tokens_per_second
    print(f"bench sim: TTFT {args.ttft_ms:g} ms, ITL {gap:g} ms ({args.tokens_per_second:g} tok/s), {args.output} "
          f"tokens; constant rates, {args.duration:g} s measured per level after a 1 s warm-up")  # fmt: skip
    print(f"{'asked':>7} {'sent/s':>8} {'ratio':>6} {'late p50/p99 ms':>16} {'TTFT p50/p99':>14} {'ITL p50/p99':>12} "
          f"{'TTFT-T':>7} {'ITL-gap':>8} {'proxy_us p50':>12} {'loop lag p50':>12} {'req':>5}")  # fmt: skip
    for row in body["levels"]["rows"]:
        t, late = row["timing"], row["lateness_ms"]
        ttft, itl = t["ttft_ms"], t["itl_ms"]
        own, lag = overhead.get(row["level"], (float("nan"), float("nan")))
        ratio = row["sent_per_s"] / row["value"]
        print(
            f"{row['value']:7g} {row['sent_per_s']:8.2f} {ratio:6.3f} {late['p50']:7.2f}/{late['p99']:7.2f} "
            f"{ttft['p50']:6.1f}/{ttft['p99']:6.1f} {itl['p50']:5.2f}/{itl['p99']:5.2f} "
            f"{ttft['p50'] - args.ttft_ms:7.2f} {itl['p50'] - gap:8.2f} {own:12.2f} {lag:12.2f} "
            f"{row['requests']:5d}"
        )
    print(f"saturation: {body['levels']['saturation']['says']}")
    ttft_p50, gap_p50 = float(np.median(direct_ttft)), float(np.median(direct_gaps))
    print(f"direct to the simulator, no proxy (20 requests one at a time): TTFT p50 {ttft_p50:.2f} ms "
          f"(+{ttft_p50 - args.ttft_ms:.2f}), read gap p50 {gap_p50:.2f} ms (+{gap_p50 - gap:.2f}): "
          "the simulator's own overshoot, which the recorded figures include")  # fmt: skip


if __name__ == "__main__":
    main()
