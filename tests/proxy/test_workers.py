"""`bench proxy --workers 2` as real processes on one loopback port, against a real upstream: each worker records its
own shard of one run; SIGINT stops every worker and closes every shard; kill -9 loses only what was in flight; a
killed supervisor's workers still close their shards; replay and auto serve identical requests in recorded order
whichever worker takes them; rotation and upload per shard; no key in any shard."""

from __future__ import annotations

import asyncio
import os
import re
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import zstandard

from bench.cli import main
from bench.core.cassette import CassetteReader
from bench.core.cassette.records import Exchange, Shard
from tests.proxy.conftest import MESSAGES, SECRET
from tests.proxy.test_parts import split_frames
from tests.proxy.test_rotation import Proxy, rotating_proxy
from tests.support.upstream import Upstream

ROOT = Path(__file__).resolve().parents[2]
dctx = zstandard.ZstdDecompressor().decompressobj


def worker_pids(proxy: Proxy) -> list[int]:
    return [int(p) for p in Path(f"/proc/{proxy.proc.pid}/task/{proxy.proc.pid}/children").read_text().split()]


@asynccontextmanager
async def workers(*args: str, env: dict[str, str] | None = None) -> AsyncIterator[Proxy]:
    """A running `bench proxy --workers 2`: its process (the supervisor), URL and the lines it printed."""
    async with rotating_proxy("--workers", "2", *args, env=env, ready=r"writing |passthrough") as proxy:
        yield proxy


async def chat(url: str, *, key: str = SECRET, **body: Any) -> bytes:
    """One streamed chat on a connection of its own (the kernel picks the worker by its address)."""
    body = {"model": "test-model", "messages": MESSAGES, "stream": True, **body}
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session,
        session.post(url + "/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"}) as resp,
    ):
        return await resp.read()


def shards(folder: Path) -> dict[int, list[Exchange]]:
    """Each shard's records by worker, every shard checked closed cleanly."""
    out: dict[int, list[Exchange]] = {}
    for path in sorted(folder.glob("*.cassette")):
        reader = CassetteReader(path)
        shard = reader.header.shard
        assert isinstance(shard, Shard), path
        out.setdefault(shard.index, []).extend(reader)
        assert not reader.truncated and reader.end is not None, path
    return out


async def test_two_workers_record_one_run_in_two_shards_and_sigint_stops_both(
    upstream: Upstream, cassettes: Path
) -> None:
    async with workers("--upstream", upstream.url, "--cassettes", str(cassettes)) as proxy:
        bodies = await asyncio.gather(*(chat(proxy.url, x_words=3 + i % 5, seed=i) for i in range(24)))
        held = asyncio.create_task(chat(proxy.url, x_words=4, x_hold="last"))
        while not any(r.body and b"x_hold" in r.body for r in upstream.requests):
            await asyncio.sleep(0.01)
        stopping = asyncio.create_task(proxy.stop())
        await asyncio.sleep(0.3)
        upstream.release("last")
        last = await held  # in flight at SIGINT: finished within the grace, recorded
        rc, out, err = await stopping
    assert rc == 0, err
    assert all(b.endswith(b"data: [DONE]\n\n") for b in [*bodies, last])
    by_worker = shards(cassettes)
    assert sorted(by_worker) == [0, 1] and all(by_worker.values())  # the kernel spread 25 connections over both
    names = sorted(p.name for p in cassettes.glob("*.cassette"))
    run = re.match(r"(rec-\S+)-w0\.cassette", names[0]).group(1)  # type: ignore[union-attr]
    assert names == [f"{run}-w0.cassette", f"{run}-w1.cassette"]
    for path in cassettes.glob("*.cassette"):
        header = CassetteReader(path).header
        assert header.shard.run == run and header.shard.count == 2  # type: ignore[union-attr]
        raw = b"".join(dctx().decompress(f) for f in split_frames(path.read_bytes()))
        assert b"[REDACTED]" in raw and SECRET.encode() not in raw
    recorded = sorted(b"".join(r.response.chunks) for rs in by_worker.values() for r in rs)
    assert recorded == sorted([*bodies, last])
    total = sum(len(rs) for rs in by_worker.values())
    assert f"stopped; {total} exchange(s) recorded by 2 workers in run {run}" in out


async def test_kill_9_of_every_process_keeps_each_finished_exchange_in_its_shard(
    upstream: Upstream, cassettes: Path
) -> None:
    async with workers("--upstream", upstream.url, "--cassettes", str(cassettes)) as proxy:
        stalled = [asyncio.create_task(chat(proxy.url, model="test-stall", x_stall_s=30)) for _ in range(4)]
        finished = [await chat(proxy.url, x_words=3 + i, seed=i) for i in range(8)]
        for pid in [proxy.proc.pid, *worker_pids(proxy)]:
            os.kill(pid, signal.SIGKILL)
        for task in stalled:
            with pytest.raises(aiohttp.ClientError):
                await task
    recorded = []
    for path in cassettes.glob("*.cassette"):
        reader = CassetteReader(path)
        recorded += [b"".join(r.response.chunks) for r in reader]
        assert reader.end is None  # nobody closed it
    assert sorted(recorded) == sorted(finished)


async def test_a_killed_supervisor_s_workers_close_their_shards(upstream: Upstream, cassettes: Path) -> None:
    async with workers("--upstream", upstream.url, "--cassettes", str(cassettes)) as proxy:
        bodies = await asyncio.gather(*(chat(proxy.url, x_words=3, seed=i) for i in range(6)))
        pids = worker_pids(proxy)
        proxy.proc.kill()
        await proxy.proc.wait()
        for _ in range(600):  # the workers stop on the kernel's SIGTERM (bounded wait: 60 s)
            if not any(Path(f"/proc/{pid}").exists() and _alive(pid) for pid in pids):
                break
            await asyncio.sleep(0.1)
    by_worker = shards(cassettes)  # both closed cleanly
    assert sorted(b"".join(r.response.chunks) for rs in by_worker.values() for r in rs) == sorted(bodies)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def test_replay_and_auto_serve_identical_requests_in_recorded_order_across_workers(
    upstream: Upstream, cassettes: Path
) -> None:
    # Six recordings of one request, each answer another ("test-count"), recorded one after another.
    async with workers("--upstream", upstream.url, "--cassettes", str(cassettes)) as proxy:
        recorded = [await chat(proxy.url, model="test-count", x_words=3) for _ in range(6)]
        assert len(set(recorded)) == 6
        assert (await proxy.stop())[0] == 0
    async with workers("--mode", "replay", "--pace", "instant", "--cassettes", str(cassettes)) as proxy:
        # Each on a new connection: the kernel spreads them over both workers (by their addresses), which claim from
        # one shared cursor. Sent until each worker has served some (64 at most: both unused is 2 ** -63 likely).
        replayed: list[bytes] = []
        while len(replayed) < 8 or (len(replayed) < 64 and not all(served_by(cassettes, "replay-"))):
            replayed.append(await chat(proxy.url, model="test-count", x_words=3))
        assert (await proxy.stop())[0] == 0
    assert all(served_by(cassettes, "replay-"))
    # In recorded order whichever worker took each, then again from the first.
    assert replayed == [recorded[i % 6] for i in range(len(replayed))]
    logs = [r for p in cassettes.glob("replay-*.cassette") for r in CassetteReader(p)]
    assert {r.replay_of.cassette for r in logs if r.replay_of} == {p.name for p in cassettes.glob("rec-*.cassette")}
    async with workers("--mode", "auto", "--upstream", upstream.url, "--cassettes", str(cassettes)) as proxy:
        answered = [await chat(proxy.url, model="test-count", x_words=3) for _ in range(7)]
        await proxy.stop()
    assert answered[:6] == recorded and answered[6] not in recorded  # the seventh was forwarded


def served_by(folder: Path, prefix: str) -> list[int]:
    """Exchanges in each worker's shard so far (read while it records: each is in its file before its answer ends)."""
    counts = [0, 0]
    for path in folder.glob(f"{prefix}*.cassette"):
        reader = CassetteReader(path)
        counts[reader.header.shard.index] += sum(1 for _ in reader)  # type: ignore[union-attr]
    return counts


async def test_each_worker_rotates_its_own_shard_and_uploads_each_closed_cassette(
    upstream: Upstream, s3: Any, s3_server: str, tmp_path: Path
) -> None:
    pytest.importorskip("s3fs")
    from tests.bench.cli.test_proxy_command_storage import _env
    from tests.support.s3 import BUCKET

    spool, prefix = tmp_path / "spool", f"s3://{BUCKET}/workers"
    args = ("--upstream", upstream.url, "--cassettes", prefix, "--spool", str(spool), "--rotate-size", "2KB")
    async with workers(*args, env=_env(s3_server)) as proxy:
        bodies: list[bytes] = []
        # Until each worker has closed and uploaded two cassettes of its shard (200 requests at most).
        while len(bodies) < 200 and not all(len(uploaded(s3, BUCKET, k)) >= 2 for k in (0, 1)):
            bodies.append(await chat(proxy.url, x_words=20, seed=len(bodies)))
        rc, out, err = await proxy.stop()
    assert rc == 0, err
    assert not list(spool.glob("*/*.cassette")), "every local copy is removed once verified"
    for k in (0, 1):
        names = uploaded(s3, BUCKET, k)
        assert len(names) >= 3 and names[0].endswith(f"-w{k}-00000.cassette")  # rotated, numbered in order
        for name in names:
            local = tmp_path / Path(name).name
            s3.get_file(name, str(local))
    by_worker = shards(tmp_path)  # each closed cleanly
    recorded = [b"".join(r.response.chunks) for rs in by_worker.values() for r in rs]
    assert sorted(recorded) == sorted(bodies)
    assert "[worker 0]: closed" in out and "[worker 1]: closed" in out and "testing" not in out + err


def uploaded(s3: Any, bucket: str, worker: int) -> list[str]:
    """The cassettes of a worker's shard in the bucket so far, in name order."""
    s3.invalidate_cache()
    if not s3.exists(f"{bucket}/workers"):
        return []
    return sorted(n for n in s3.ls(f"{bucket}/workers") if f"-w{worker}-" in n)


def test_bad_workers_flag_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for bad in ("0", "-2", "many"):
        assert main(["proxy", "--upstream", "http://127.0.0.1:9", "--workers", bad]) == 1
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and f"--workers {bad}" in err
