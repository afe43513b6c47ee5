"""Compare what `bench proxy` recorded with what an openai SDK client measured for the same streamed requests.

Shared by tests/e2e (a coarse bound that catches mis-stamped reads) and benchmarks/timing_fidelity.py (the figure).
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openai import AsyncOpenAI, DefaultAsyncHttpxClient

from bench.cassette import find_cassettes, read_cassette
from bench.parse import parse_exchange
from tests.support.llm_server import MODEL_ALIAS, free_port


@dataclass
class Fidelity:
    recorded: int = 0
    # client minus recorded, per request (TTFT) and per event gap (ITL), in microseconds
    ttft_diff_us: list[float] = field(default_factory=list)
    itl_diff_us: list[float] = field(default_factory=list)
    # requests whose recorded event count differs from the client's, or that recorded no first token
    mismatched: int = 0


async def wait_for_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def measure_fidelity(upstream: str, cassettes: Path, requests: int, max_tokens: int = 48) -> Fidelity:
    """Stream `requests` chats through a `bench proxy` subprocess (as users run it, so the client's event loop
    measures only itself) and compare the client's clock with the recorded timing."""
    port = free_port()
    cmd = [sys.executable, "-m", "bench", "proxy", "--upstream", upstream, "--port", str(port)]
    proc = subprocess.Popen([*cmd, "--cassettes", str(cassettes)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sent: list[float] = []

    async def on_request(request: Any) -> None:
        # The client's clock starts when the request goes on the wire, not while the SDK builds it.
        sent.append(time.perf_counter())

    client_ttft: list[float] = []
    client_gaps: list[list[float]] = []
    try:
        await wait_for_port(port)
        http = DefaultAsyncHttpxClient(event_hooks={"request": [on_request]})
        client = AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="k", http_client=http)
        for i in range(requests):
            stream = await client.chat.completions.create(
                model=MODEL_ALIAS,
                messages=[{"role": "user", "content": f"Count from {i} to {i + 20}."}],
                max_tokens=max_tokens,
                temperature=0,
                stream=True,
            )
            stamps = [time.perf_counter() async for chunk in stream if chunk.choices]
            client_ttft.append((stamps[0] - sent[-1]) * 1e6)
            client_gaps.append([(b - a) * 1e6 for a, b in itertools.pairwise(stamps)])
        await client.close()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    [cassette] = find_cassettes([cassettes])
    _, records = read_cassette(cassette)
    result = Fidelity(recorded=len(records))
    for record, ttft, gaps in zip(records, client_ttft, client_gaps, strict=False):
        timing = parse_exchange(record).timing
        if timing.ttft_us is None or len(timing.itl_us) != len(gaps):
            result.mismatched += 1
            continue
        result.ttft_diff_us.append(ttft - timing.ttft_us)
        result.itl_diff_us.extend(c - r for c, r in zip(gaps, timing.itl_us, strict=True))
    return result
