"""`bench sim` as a real process: its flags reach the simulator (key required, pacing)."""

from __future__ import annotations

import asyncio
import re
import sys
import time
from pathlib import Path

import aiohttp
import orjson

ROOT = Path(__file__).resolve().parents[3]


async def test_api_key_ttft_and_tokens_per_second_flags_reach_the_simulator() -> None:
    flags = ("--port", "0", "--api-key", "sk-sim-test", "--ttft-ms", "300", "--tokens-per-second", "20")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench", "sim", *flags, cwd=ROOT, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        found = re.search(r"serving (http://\S+)", line)
        assert found, line
        base = found.group(1)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
            for auth in ({}, {"Authorization": "Bearer sk-other"}):  # --api-key: anything else is refused
                async with session.get(f"{base}/models", headers=auth) as resp:
                    assert resp.status == 401
            body = {"model": "oracle", "stream": True, "messages": [{"role": "user", "content": "Say hello."}]}
            auth = {"Authorization": "Bearer sk-sim-test"}
            t0 = time.monotonic()
            arrivals: list[float] = []
            async with session.post(f"{base}/chat/completions", json=body, headers=auth) as resp:
                assert resp.status == 200
                async for raw in resp.content:
                    if raw.startswith(b"data: {") and orjson.loads(raw[6:])["choices"][:1]:
                        delta = orjson.loads(raw[6:])["choices"][0]["delta"]
                        if delta.get("content"):
                            arrivals.append(time.monotonic())
    finally:
        proc.kill()
        await proc.wait()
    # Lower bounds only (a busy machine is slower, never faster): 0.3 s to the first token (--ttft-ms), then one
    # token per 1/20 s (--tokens-per-second); without the flags the answer comes at once.
    assert len(arrivals) >= 3
    assert arrivals[0] - t0 >= 0.3
    assert arrivals[-1] - arrivals[0] >= (len(arrivals) - 1) / 20 * 0.9
