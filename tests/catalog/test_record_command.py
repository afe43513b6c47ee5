"""`bench record` as a real process: the flags that choose where requests go and which API they use."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from bench.catalog.sim import start_sim
from bench.core.cassette import CassetteReader, find_cassettes
from bench.proxy import start_proxy
from bench.scorer.checked_catalog import load_catalog

ROOT = Path(__file__).resolve().parents[2]


async def test_proxy_and_api_flags_send_through_a_running_proxy_to_the_responses_api(tmp_path: Path) -> None:
    test = "tools.weather_paris"
    async with await start_sim(catalog=load_catalog(None)) as sim:
        proxy = await start_proxy(upstream=sim.url, cassettes=tmp_path / "proxy")
        try:
            out = tmp_path / "out"
            flags = ("--proxy", proxy.url, "--api", "responses", "--tests", test, "--model", "oracle", "--quiet")
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bench", "record", *flags, "--out", str(out), cwd=ROOT,
                env={**os.environ, "BENCH_API_KEY": "sk-record-test"},
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            stdout, stderr = await asyncio.wait_for(proc.communicate(), 120)
            assert proc.returncode == 0, stderr.decode()
            assert "1/1 jobs" in stdout.decode()
        finally:
            await proxy.close()
    # --proxy: the running proxy recorded the exchange; no proxy of the recorder's own wrote a cassette.
    assert not (find_cassettes([out]) if out.exists() else [])
    assert proxy.cassette_path is not None
    reader = CassetteReader(proxy.cassette_path)
    exchanges = list(reader)
    # That proxy's cassette has no run metadata in its header; the X-Bench-* tags are there.
    assert reader.header.run.id is None and reader.header.run.tests is None
    [exchange] = [e for e in exchanges if e.tags.get("test")]  # the rest: the gateway check's
    # --api responses: the catalog test went to /v1/responses, as a Responses API request.
    assert exchange.request.path == "/v1/responses" and exchange.response.status == 200
    assert exchange.tags["test"] == test and b'"input"' in exchange.request.body
