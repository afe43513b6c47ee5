"""Timing fidelity against a real model: does what `bench proxy` records agree with what the client measured?

Starts SmolLM2-135M (llama-cpp-python, the .[local] extra) and `bench proxy` in its own process, streams N chat
requests through it with the openai SDK, and compares per request the client's TTFT (request sent to first event
with choices) with the recorded one, and every client-side inter-event gap with the recorded ITL. The client is
measured at two levels on the same requests (tests/support/fidelity.py): `bytes`, as serving benchmarks do
(raw SSE event arrival at the HTTP transport), and `sdk` (the SDK yielding the parsed chunk, which adds its own
decoding). Goal: |client - recorded| within 1 ms at p50. Run it on a quiet machine: python benchmarks/timing_fidelity.py
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.fidelity import Level, measure_fidelity
from tests.support.llm_server import llama_server


def p50_p90(values: list[float]) -> str:
    return f"p50 {statistics.median(values):6.0f} us  p90 {statistics.quantiles(values, n=10)[-1]:6.0f} us"


def report(name: str, level: Level) -> bool:
    """Print one level's figures; True if it meets the 1 ms goal at p50."""
    ttft = level.ttft_diff_us[1:]  # the first request pays for the connection
    abs_itl = [abs(x) for x in level.itl_diff_us]
    met = abs(statistics.median(ttft)) <= 1000 and statistics.median(abs_itl) <= 1000
    print(
        f"{name:5} client: TTFT client - recorded {p50_p90(ttft)} | ITL |client - recorded| {p50_p90(abs_itl)}", end=""
    )
    print(f" | {level.mismatched} with another event count | goal {'met' if met else 'MISSED'}")
    return met


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=60)
    args = parser.parse_args()
    with llama_server() as base, tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(measure_fidelity(base.removesuffix("/v1"), Path(tmp), args.requests + 1, max_tokens=64))
    print(f"{args.requests} streamed requests to SmolLM2-135M through bench proxy (own process); goal: within 1000 us")
    report("wire", result.wire)
    report("bytes", result.bytes)
    report("sdk", result.sdk)


if __name__ == "__main__":
    main()
