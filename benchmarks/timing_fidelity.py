"""Timing fidelity against a real model: does what `bench proxy` records agree with what the client measured?

Starts SmolLM2-135M (llama-cpp-python, the .[local] extra) and `bench proxy` in its own process, streams N chat
requests through it with the openai SDK, and compares per request the client's TTFT (request on the wire to first
chunk with choices) with the recorded one, and every client-side inter-event gap with the recorded ITL.
Goal: |client - recorded| within 1 ms at p50. Run it on a quiet machine: python benchmarks/timing_fidelity.py
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from openai import AsyncOpenAI, DefaultAsyncHttpxClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cassette import find_cassettes, read_cassette
from bench.parse import parse_exchange
from tests.support.llm_server import free_port, llama_server


async def measure(upstream: str, n: int, out: Path) -> tuple[list[float], list[float]]:
    port = free_port()
    cmd = [sys.executable, "-m", "bench", "proxy", "--upstream", upstream, "--port", str(port), "--cassettes", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sent: list[float] = []

    async def on_request(request: Any) -> None:
        sent.append(time.perf_counter())

    ttfts: list[float] = []
    gaps: list[list[float]] = []
    try:
        for _ in range(100):
            try:
                _, w = await asyncio.open_connection("127.0.0.1", port)
                w.close()
                break
            except OSError:
                await asyncio.sleep(0.1)
        client = AsyncOpenAI(
            base_url=f"http://127.0.0.1:{port}/v1",
            api_key="k",
            http_client=DefaultAsyncHttpxClient(event_hooks={"request": [on_request]}),
        )
        for i in range(n):
            stream = await client.chat.completions.create(
                model="smollm2",
                messages=[{"role": "user", "content": f"Write a short poem about the number {i}."}],
                max_tokens=64,
                temperature=0,
                stream=True,
            )
            stamps = [time.perf_counter() async for chunk in stream if chunk.choices]
            ttfts.append((stamps[0] - sent[-1]) * 1e6)
            gaps.append([(b - a) * 1e6 for a, b in itertools.pairwise(stamps)])
        await client.close()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    [cassette] = find_cassettes([out])
    _, records = read_cassette(cassette)
    ttft_diff: list[float] = []
    itl_diff: list[float] = []
    for rec, ttft, g in zip(records, ttfts, gaps, strict=True):
        timing = parse_exchange(rec).timing
        ttft_diff.append(ttft - (timing.ttft_us or 0))
        itl_diff.extend(c - r for c, r in zip(g, timing.itl_us, strict=True))
    return ttft_diff[1:], itl_diff  # the first request pays for the connection


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20)
    args = parser.parse_args()
    with llama_server() as base, tempfile.TemporaryDirectory() as tmp:
        ttft, itl = asyncio.run(measure(base.removesuffix("/v1"), args.requests, Path(tmp)))
    q = statistics.quantiles
    print(f"{args.requests} streamed requests to SmolLM2-135M through bench proxy (own process)")
    print(f"TTFT client - recorded: p50 {statistics.median(ttft):8.0f} us   p90 {q(ttft, n=10)[-1]:8.0f} us")
    abs_itl = [abs(x) for x in itl]
    print(f"ITL |client - recorded|: p50 {statistics.median(abs_itl):7.0f} us   p90 {q(abs_itl, n=10)[-1]:8.0f} us")
    print(f"goal: within 1000 us at p50 -> TTFT {'met' if abs(statistics.median(ttft)) <= 1000 else 'MISSED'}, "
          f"ITL {'met' if statistics.median(abs_itl) <= 1000 else 'MISSED'}")  # fmt: skip


if __name__ == "__main__":
    main()
