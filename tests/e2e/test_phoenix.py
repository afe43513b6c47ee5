"""Acceptance: an OpenAI Agents SDK session recorded through the proxy (against the simulator) and exported with
`bench export --format otlp` appears in Arize Phoenix, a receiver people use, as one trace: the right span count,
models, token counts and TTFT, read back through Phoenix's REST API. Phoenix runs from its own virtualenv
(.venv-phoenix, which scripts/test installs: its pins are not ours), on 127.0.0.1, with a fresh working folder."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from itertools import accumulate
from pathlib import Path
from typing import Any

import pytest

from bench.catalog.sim import start_sim
from bench.cli import main
from bench.core.cassette import CassetteReader, find_cassettes
from bench.proxy.server import start_proxy
from tests.e2e.test_agents_sdk import run_agent

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PHOENIX = ROOT / ".venv-phoenix" / "bin" / "phoenix"
START_S = 300  # Phoenix starts in ~40 s on a busy 2-core machine; only a broken install takes this long
ARRIVE_S = 60  # spans are written in batches a second or so after they are received


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not PHOENIX.exists():
        pytest.skip("Arize Phoenix is not installed: scripts/test installs it into .venv-phoenix")
    work = tmp_path_factory.mktemp("phoenix")
    port = _free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(work),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(_free_port()),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = open(work / "phoenix.log", "wb")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen([str(PHOENIX), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_S
        while True:
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=5):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(
                        f"Phoenix did not start: {(work / 'phoenix.log').read_text()[-2000:]}"
                    ) from None
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _when(text: str) -> int:
    """An ISO 8601 time as microseconds since the epoch."""
    moment = datetime.fromisoformat(text)
    return int(moment.timestamp()) * 1_000_000 + moment.microsecond


def test_an_agents_sdk_session_is_one_trace_in_phoenix(phoenix: str, tmp_path: Path) -> None:
    async def record() -> None:
        async with await start_sim() as sim, await start_proxy(upstream=sim.url, cassettes=tmp_path) as proxy:
            await run_agent(proxy.url + "/v1", streamed=True)

    asyncio.run(record())
    argv = ["export", str(tmp_path), "--format", "otlp", "--endpoint", phoenix, "--signals", "traces"]
    assert main(argv) == 0
    deadline = time.monotonic() + ARRIVE_S
    while True:
        spans = _get(f"{phoenix}/v1/projects/default/spans?limit=100")["data"]
        if len(spans) >= 4 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert len(spans) == 4 and len({s["context"]["trace_id"] for s in spans}) == 1
    (agent,) = [s for s in spans if s["parent_id"] is None]
    assert agent["name"] == "invoke_agent"
    chats = sorted((s for s in spans if s is not agent), key=lambda s: s["start_time"])
    assert all(s["parent_id"] == agent["context"]["span_id"] for s in chats)

    # Known answers from the cassette's raw reads: each exchange's usage and the arrival of its first delta event.
    records = sorted((r for p in find_cassettes([tmp_path]) for r in CassetteReader(p)), key=lambda r: r.started)
    assert len(records) == 3
    for span, record in zip(chats, records, strict=True):
        events = [
            (at, json.loads(line[6:]))
            for at, chunk in zip(accumulate(record.response.chunk_us), record.response.chunks, strict=True)
            for line in chunk.decode().splitlines()
            if line.startswith("data: ")
        ]
        usage = next(ev["response"]["usage"] for _, ev in events if ev["type"] == "response.completed")
        ttft_us = next(at for at, ev in events if ev["type"].endswith(".delta"))
        attrs = span["attributes"]
        assert span["name"] == "chat oracle"
        assert attrs["gen_ai.request.model"] == attrs["gen_ai.response.model"] == "oracle"
        assert attrs["gen_ai.usage.input_tokens"] == usage["input_tokens"]
        assert attrs["gen_ai.usage.output_tokens"] == usage["output_tokens"]
        assert _when(span["start_time"]) == record.started
        (first,) = [e for e in span["events"] if e["name"] == "bench.first_token"]
        assert _when(first["timestamp"]) - _when(span["start_time"]) == ttft_us
