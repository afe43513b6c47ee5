"""`bench proxy` as a real process: graceful SIGINT, kill -9 in the middle of streams, flag errors."""

from __future__ import annotations

import asyncio
import os
import re
import resource
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bench.cli import main
from bench.core.cassette import CassetteReader
from bench.core.cassette.records import MatchSettings
from bench.proxy import start_proxy
from tests.proxy.conftest import MESSAGES
from tests.support.upstream import Upstream

ROOT = Path(__file__).resolve().parents[3]


@asynccontextmanager
async def bench_proxy(
    *args: str, file_limit: int | None = None
) -> AsyncIterator[tuple[asyncio.subprocess.Process, str, Path]]:
    """A `bench proxy` subprocess; yields it, its URL and its cassette path once it listens. `file_limit`: a disk
    that is full after that many bytes of any file it writes (RLIMIT_FSIZE: writes past it fail with EFBIG)."""
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
        preexec_fn=None if file_limit is None else (lambda: limit_files(file_limit)),
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


def limit_files(size: int) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the kernel kills the process instead of failing the write
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))


async def post(session: aiohttp.ClientSession, url: str, **body: Any) -> bytes:
    body = {"model": "test-model", "messages": MESSAGES, "stream": True, **body}
    async with session.post(url + "/v1/chat/completions", json=body) as resp:
        return await resp.read()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
async def test_sigint_or_sigterm_lets_in_flight_streams_finish_and_closes_the_cassette(
    upstream: Upstream, cassettes: Path, sig: signal.Signals
) -> None:
    async with (
        bench_proxy("--upstream", upstream.url, "--cassettes", str(cassettes)) as (proc, url, path),
        aiohttp.ClientSession() as session,
    ):
        stream = asyncio.create_task(post(session, url, x_ttft_ms=1, x_delay_ms=40, x_words=10))
        while not upstream.requests:
            await asyncio.sleep(0.01)
        proc.send_signal(sig)
        body = await asyncio.wait_for(stream, 20)
        assert await asyncio.wait_for(proc.wait(), 20) == 0
    assert body.endswith(b"data: [DONE]\n\n")
    reader = CassetteReader(path)
    records = list(reader)
    assert not reader.truncated and reader.end is not None and reader.end.interrupted is True
    assert reader.end.cut_by_shutdown == 0
    assert [r.outcome for r in records] == ["complete"]
    assert b"".join(records[0].response.chunks) == body


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
    assert [b"".join(r.response.chunks) for r in records] == list(finished.values())

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


async def wait_for_line(stream: asyncio.StreamReader | None, pattern: str) -> str:
    """The first line of a subprocess's output matching `pattern` (fails at the end of the output)."""
    assert stream is not None
    while True:
        line = (await asyncio.wait_for(stream.readline(), 30)).decode()
        assert line, f"no line matching {pattern!r}"
        if re.search(pattern, line):
            return line


async def test_a_second_ctrl_c_cuts_in_flight_exchanges_without_waiting_for_the_grace(
    upstream: Upstream, cassettes: Path
) -> None:
    args = ("--upstream", upstream.url, "--cassettes", str(cassettes), "--grace", "600")
    async with (
        bench_proxy(*args) as (proc, url, path),
        aiohttp.ClientSession() as session,
    ):
        stalled = asyncio.create_task(post(session, url, model="test-stall", x_stall_s=600))
        while not upstream.requests:
            await asyncio.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        assert "1 exchange(s) in flight get up to 600 s" in await wait_for_line(proc.stderr, "stopping")
        proc.send_signal(signal.SIGINT)
        assert "cutting in-flight exchanges now" in await wait_for_line(proc.stderr, "again")
        # Far less than the 600 s grace: only a second Ctrl-C that works ends the process in time.
        assert await asyncio.wait_for(proc.wait(), 30) == 0
        with pytest.raises(aiohttp.ClientError):
            await stalled
    reader = CassetteReader(path)
    records = list(reader)
    assert reader.end is not None and reader.end.cut_by_shutdown == 1
    assert [r.outcome for r in records] == ["client_disconnected"] and "shut down" in records[0].error


async def test_a_request_during_shutdown_gets_an_openai_shaped_503(upstream: Upstream, cassettes: Path) -> None:
    async with (
        bench_proxy("--upstream", upstream.url, "--cassettes", str(cassettes)) as (proc, url, path),
        aiohttp.ClientSession() as session,
    ):
        # A kept-alive connection (one per session with limit=1) outlives the listening socket.
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as kept:
            async with kept.get(url + "/v1/models") as resp:
                assert resp.status == 200
                await resp.read()
            stream = asyncio.create_task(post(session, url, x_ttft_ms=1, x_delay_ms=100, x_words=20))
            while len(upstream.requests) < 2:
                await asyncio.sleep(0.01)
            proc.send_signal(signal.SIGINT)
            await wait_for_line(proc.stderr, "stopping")
            async with kept.get(url + "/v1/models") as resp:
                error = (await resp.json())["error"]
                assert resp.status == 503 and error["code"] == "proxy_closing" and error["type"] == "server_error"
                assert resp.headers["Connection"] == "close"
        assert (await asyncio.wait_for(stream, 20)).endswith(b"data: [DONE]\n\n")
        assert await asyncio.wait_for(proc.wait(), 20) == 0
    assert [r.outcome for r in CassetteReader(path)] == ["complete", "complete"]  # the 503 is not an exchange


async def test_request_timeout_gives_a_504_before_headers_and_cuts_a_long_stream(
    upstream: Upstream, cassettes: Path
) -> None:
    args = ("--upstream", upstream.url, "--cassettes", str(cassettes), "--request-timeout", "1")
    async with (
        bench_proxy(*args) as (proc, url, path),
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session,
    ):
        body = {"model": "test-slow-headers", "messages": MESSAGES, "x_stall_s": 600}
        async with session.post(url + "/v1/chat/completions", json=body) as resp:
            assert resp.status == 504 and (await resp.json())["error"]["code"] == "upstream_timeout"
        with pytest.raises(aiohttp.ClientPayloadError):
            await post(session, url, x_ttft_ms=1, x_delay_ms=200, x_words=50)  # 10 s of stream
        proc.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(proc.wait(), 20) == 0
    records = sorted(CassetteReader(path), key=lambda r: r.started)
    assert [(r.outcome, r.response.status) for r in records] == [("timeout", 504), ("timeout", 200)]
    assert "request timeout" in records[1].error and records[1].response.cut


async def test_client_bounds_flags_reach_the_proxy(upstream: Upstream, cassettes: Path) -> None:
    bounds = ("--header-timeout", "0.3", "--keepalive-timeout", "0.3", "--body-timeout", "0.3")
    async with bench_proxy("--upstream", upstream.url, "--cassettes", str(cassettes), *bounds) as (proc, url, _):
        host, port = url.removeprefix("http://").rsplit(":", 1)
        silent = await asyncio.open_connection(host, int(port))
        assert await asyncio.wait_for(silent[0].read(), 30) == b""  # --header-timeout
        idle = await asyncio.open_connection(host, int(port))
        idle[1].write(b"GET /v1/models HTTP/1.1\r\nHost: proxy\r\n\r\n")
        assert (await asyncio.wait_for(idle[0].read(), 30)).startswith(b"HTTP/1.1 200 OK")  # --keepalive-timeout
        slow = await asyncio.open_connection(host, int(port))
        slow[1].write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\nContent-Length: 100\r\n\r\n{")
        answer = await asyncio.wait_for(slow[0].read(), 30)  # --body-timeout
        assert answer.startswith(b"HTTP/1.1 408 Request Timeout") and b'"code": "request_timeout"' in answer
        for _, writer in (silent, idle, slow):
            writer.close()
        proc.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(proc.wait(), 20) == 0
        assert proc.stdout is not None
        stop_line = (await proc.stdout.read()).decode()
    assert "1 bad request(s) refused, 1 slow connection(s) closed" in stop_line


def test_a_negative_client_bound_is_a_one_line_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    argv = ["proxy", "--upstream", "http://127.0.0.1:9", "--cassettes", str(tmp_path)]
    assert main([*argv, "--header-timeout", "-1"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == ["bench: error: --header-timeout -1: give seconds, or 0 for no limit"]


async def test_a_full_disk_at_start_is_one_line_and_leaves_no_file(tmp_path: Path) -> None:
    cassettes = tmp_path / "c"
    cassettes.mkdir()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench",
        "proxy",
        "--port",
        "0",
        "--upstream",
        "http://127.0.0.1:9",
        "--cassettes",
        str(cassettes),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=lambda: limit_files(0),
    )
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 1
    [line] = err.decode().strip().splitlines()
    assert line.startswith("bench: error: cannot write cassette ") and "File too large" in line
    assert list(cassettes.iterdir()) == []


async def test_a_disk_that_fills_mid_run_keeps_serving_counts_what_was_not_recorded_and_fails(
    upstream: Upstream, cassettes: Path
) -> None:
    n = 40
    async with (
        bench_proxy("--upstream", upstream.url, "--cassettes", str(cassettes), file_limit=4000) as (proc, url, path),
        aiohttp.ClientSession() as session,
    ):
        bodies = [await post(session, url, x_words=20 + i) for i in range(n)]
        assert all(b.endswith(b"data: [DONE]\n\n") for b in bodies)  # every client was served
        assert proc.stderr is not None
        # Said at once, while the proxy still runs:
        said = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
        assert said.startswith(f"bench proxy: cannot record to {path}: File too large;"), said
        proc.send_signal(signal.SIGINT)
        out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 1
    stop = next(line for line in out.decode().splitlines() if "stopped;" in line)
    recorded = int(re.search(r"stopped; (\d+) exchange\(s\) recorded", stop).group(1))  # type: ignore[union-attr]
    [lost_line] = [line for line in err.decode().splitlines() if "NOT recorded" in line]
    lost = int(re.search(r"error: (\d+) exchange", lost_line).group(1))  # type: ignore[union-attr]
    assert "File too large" in lost_line and lost > 0 and recorded + lost == n
    reader = CassetteReader(path)
    assert len(list(reader)) == recorded and reader.end is None and not reader.damaged


def agent_turn(call: str, trace: str, when: str) -> dict[str, Any]:
    """A request of an agent's second turn, with the volatile values such traffic carries (docs/proxy.md,
    "Matching"): a tool-call id its client made up, a tracing field, a time in the prompt."""
    return {
        "x_trace": trace,
        "messages": [
            {"role": "user", "content": f"It is {when}. What is the weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call, "type": "function", "function": {"name": "w", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": call, "content": "sunny"},
        ],
    }


async def test_idle_timeout_and_match_flags_reach_the_proxy(upstream: Upstream, cassettes: Path) -> None:
    args = ("--upstream", upstream.url, "--cassettes", str(cassettes), "--idle-timeout", "0.3")
    async with bench_proxy(*args) as (proc, url, path), aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientPayloadError):  # --idle-timeout: silence mid-stream cuts it
            await post(session, url, model="test-stall", x_stall_s=30)
        recorded = await post(session, url, **agent_turn("call_abc", "t-1", "2026-01-01T10:00:00Z"))
        proc.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(proc.wait(), 20) == 0
    records = sorted(CassetteReader(path), key=lambda r: r.started)
    assert [r.outcome for r in records] == ["timeout", "complete"]
    assert records[0].response.cut and "idle" in (records[0].error or "")

    later = agent_turn("call_xyz", "t-2", "2026-02-03T11:12:13Z")
    strict = ("--mode", "replay", "--cassettes", str(cassettes))
    async with bench_proxy(*strict) as (proc, url, _), aiohttp.ClientSession() as session:
        async with session.post(url + "/v1/chat/completions", json={"model": "test-model", **later}) as resp:
            assert resp.status == 404  # strict matching: the volatile values make it another request
        proc.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(proc.wait(), 20) == 0
    loose = ("--match-ignore", "x_trace", "--match-tool-call-ids", "--match-blank", r"\d{4}-[\dT:-]+Z")
    async with bench_proxy(*strict, *loose) as (proc, url, replayed), aiohttp.ClientSession() as session:
        assert await post(session, url, **later) == recorded
        proc.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(proc.wait(), 20) == 0
    settings = CassetteReader(replayed).header.settings
    assert settings is not None and settings.match == MatchSettings(
        strict=False, ignore=["x_trace"], tool_call_ids=True, blank=[r"\d{4}-[\dT:-]+Z"]
    )
