"""Timing fidelity against a real model: does what `bench proxy` records agree with what the client measured?

Starts SmolLM2-135M (llama-cpp-python, the .[local] extra) and `bench proxy` in its own process, streams N chat
requests through it with the openai SDK, and compares per request the client's TTFT (request on the wire to first
chunk with choices) with the recorded one, and every client-side inter-event gap with the recorded ITL.
Goal: |client - recorded| within 1 ms at p50. Run it on a quiet machine: python benchmarks/timing_fidelity.py
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.llm_server import llama_server
from tests.support.timing_fidelity import measure_fidelity


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20)
    args = parser.parse_args()
    with llama_server() as base, tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(measure_fidelity(base.removesuffix("/v1"), Path(tmp), args.requests + 1, max_tokens=64))
    ttft = result.ttft_diff_us[1:]  # the first request pays for the connection
    itl = result.itl_diff_us
    q = statistics.quantiles
    print(f"{args.requests} streamed requests to SmolLM2-135M through bench proxy (own process), ", end="")
    print(f"{result.mismatched} with a different event count")
    print(f"TTFT client - recorded: p50 {statistics.median(ttft):8.0f} us   p90 {q(ttft, n=10)[-1]:8.0f} us")
    abs_itl = [abs(x) for x in itl]
    print(f"ITL |client - recorded|: p50 {statistics.median(abs_itl):7.0f} us   p90 {q(abs_itl, n=10)[-1]:8.0f} us")
    print(f"goal: within 1000 us at p50 -> TTFT {'met' if abs(statistics.median(ttft)) <= 1000 else 'MISSED'}, "
          f"ITL {'met' if statistics.median(abs_itl) <= 1000 else 'MISSED'}")  # fmt: skip


if __name__ == "__main__":
    main()
