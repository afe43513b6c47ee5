"""`bench proxy` as a real process: graceful SIGINT, kill -9 in the middle of streams, flag errors."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bench.cassette import CassetteReader
from bench.cli import main
from proxy import start_proxy
from tests.proxy.conftest import MESSAGES
from tests.support.upstream import Upstream

ROOT = Path(__file__).resolve().parents[2]


@asynccontextmanager
async def bench_proxy(*args: str) -> AsyncIterator[tuple[asyncio.subprocess.Process, str, Path]]:
    """A `bench proxy` subprocess; yields it, its URL and its cassette path once it listens."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench",
        "proxy",
        "--port",
        "0",
        *args,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    url = cassette = None
    try:
        while cassette is None:
            line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
            assert line, "bench proxy exited before listening"
            if m := re.search(r"listening on (http://\S+)", line):
                url = m.group(1)
            if m := re.search(r"writing (\S+)", line):
                cassette = Path(m.group(1))
        assert url is not None
        yield proc, url, cassette
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def post(session: aiohttp.ClientSession, url: str, **body: Any) -> bytes:
    body = {"model": "test-model", "messages": MESSAGES, "stream": True, **body}
    async with session.post(url + "/v1/chat/completions", json=body) as resp:
        return await resp.read()


async def test_sigint_lets_in_flight_streams_finish_and_closes_the_cassette(
    upstream: Upstream, cassettes: Path
) -> None:
    async with (
        bench_proxy("--upstream", upstream.url, "--cassettes", str(cassettes)) as (proc, url, path),
        aiohttp.ClientSession() as session,
    ):
        stream = asyncio.create_task(post(session, url, x_ttft_ms=1, x_delay_ms=40, x_words=10))
        while not upstream.requests:
            await asyncio.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        body = await asyncio.wait_for(stream, 20)
        assert await asyncio.wait_for(proc.wait(), 20) == 0
    assert body.endswith(b"data: [DONE]\n\n")
    reader = CassetteReader(path)
    records = list(reader)
    assert not reader.truncated and reader.end is not None and reader.end["interrupted"] is True
    assert [r["outcome"] for r in records] == ["complete"]
    assert b"".join(records[0]["response"]["chunks"]) == body


async def test_kill_9_keeps_every_finished_exchange_readable_and_replayable(
    upstream: Upstream, cassettes: Path
) -> None:
    async with (
        bench_proxy("--upstream", upstream.url, "--cassettes", str(cassettes)) as (proc, url, path),
        aiohttp.ClientSession() as session,
    ):
        stalled = [asyncio.create_task(post(session, url, model="test-stall", x_stall_s=30)) for _ in range(3)]
        finished = {}
        for i in range(5):
            finished[i] = await post(session, url, x_words=5 + i)
        # No pause: an exchange is finished for its client only once its record has reached the file.
        proc.kill()
        await proc.wait()
        for task in stalled:
            with pytest.raises(aiohttp.ClientError):
                await task
    reader = CassetteReader(path)
    records = list(reader)
    assert reader.truncated and reader.end is None
    assert [b"".join(r["response"]["chunks"]) for r in records] == list(finished.values())

    await upstream.close()
    player = await start_proxy(upstream=None, cassettes=cassettes, mode="replay", pace="instant")
    async with aiohttp.ClientSession() as session:
        for i, body in finished.items():
            assert await post(session, player.url, x_words=5 + i) == body
    await player.close()


def test_flag_errors_are_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    os.environ.pop("BENCH_TEST_NO_SUCH_KEY", None)
    argv = ["proxy", "--upstream", "http://127.0.0.1:9", "--cassettes", str(tmp_path)]
    assert main([*argv, "--upstream-key-env", "BENCH_TEST_NO_SUCH_KEY"]) == 1
    assert main([*argv, "--pace", "sometimes"]) == 1
    assert main(["proxy", "--cassettes", str(tmp_path)]) == 1
    assert main(["proxy", "--mode", "replay", "--cassettes", str(tmp_path / "none")]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 4 and all(line.startswith("bench: error: ") for line in err)
    assert "BENCH_TEST_NO_SUCH_KEY" in err[0] and "realtime, instant or xN" in err[1]
    assert "--upstream" in err[2] and "no recorded exchanges" in err[3]
