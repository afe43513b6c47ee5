"""Ctrl-C in the middle of a real `bench record` process: a readable cassette, and `--resume` completes the run."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import time
from pathlib import Path

from bench.catalog.sim import start_sim
from bench.core.cassette import CassetteReader, find_cassettes
from bench.scorer.checked_catalog import load_catalog
from tests.support.rescored import rescored as rescore

ROOT = Path(__file__).resolve().parents[3]
MODELS = ["oracle", "flawed-no-call"]
EPOCHS = 3


async def bench(*args: str) -> asyncio.subprocess.Process:
    env = {**os.environ, "BENCH_API_KEY": "sk-interrupt-test"}
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench", *args, cwd=ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def wait_for_exchanges(out: Path, deadline: float) -> None:
    while time.monotonic() < deadline:
        files = find_cassettes([out]) if out.exists() else []
        if files and files[0].stat().st_size > 2000:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the recorder wrote nothing")


async def test_sigint_then_resume_completes_the_run(tmp_path: Path) -> None:
    catalog = load_catalog(None)
    tools = [t.id for t in catalog.select(["tools"])]
    out = tmp_path / "cassettes"
    async with await start_sim(catalog=catalog, ttft_ms=20, tokens_per_second=400) as sim:
        record = ["record", "--upstream", sim.url, "--suite", "tools", "--epochs", str(EPOCHS), "--concurrency", "2"]
        proc = await bench(*record, *[a for m in MODELS for a in ("--model", m)], "--out", str(out))
        await wait_for_exchanges(out, time.monotonic() + 30)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 130, stderr.decode()
        hint = re.search(rb"bench record --resume (\S+) --out", stderr)
        assert hint is not None, stderr.decode()
        run_id = hint.group(1).decode()

        (first,) = find_cassettes([out])
        reader = CassetteReader(first)
        part1 = list(reader)
        assert reader.end is not None and reader.end.interrupted is True
        total = len(tools) * len(MODELS) * EPOCHS
        done1 = {(e.tags["test"], e.tags["model"], e.tags["epoch"]) for e in part1}
        assert 0 < len(done1) < total

        proc = await bench("record", "--resume", run_id, "--out", str(out), "--quiet")
        stdout, stderr = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, stderr.decode()
        assert b"already recorded" in stdout

    second = next(p for p in find_cassettes([out]) if p != first)
    reader2 = CassetteReader(second)
    part2 = list(reader2)
    assert reader2.header.run.id == run_id and reader2.header.run.resumed_from == [first.name]
    assert reader2.end is not None and not reader2.end.interrupted
    done2 = {(e.tags["test"], e.tags["model"], e.tags["epoch"]) for e in part2}
    assert not done1 & done2  # only what was missing was recorded again
    assert all(e.tags["run"] == run_id for e in part2)
    every = {(t, m, str(e)) for t in tools for m in MODELS for e in range(EPOCHS)}
    assert done1 | done2 == every
    assert b"sk-interrupt-test" not in first.read_bytes() + second.read_bytes()
    # The two cassettes score as one run: one result per job, whichever cassette holds it.
    meta, results = rescore([out], catalog=catalog)
    assert sorted((r.test, r.model, str(r.epoch)) for r in results) == sorted(every)
    assert {r.run for r in results} == {run_id} and len(meta.cassettes) == 2


async def test_second_sigint_exits_at_once_with_a_readable_cassette(tmp_path: Path) -> None:
    catalog = load_catalog(None)
    out = tmp_path / "cassettes"
    # 4 tokens a second: in-flight answers would take seconds to finish.
    async with await start_sim(catalog=catalog, ttft_ms=0, tokens_per_second=4) as sim:
        proc = await bench("record", "--upstream", sim.url, "--model", "oracle", "--suite", "tools", "--out", str(out))
        await wait_for_exchanges(out, time.monotonic() + 30)
        proc.send_signal(signal.SIGINT)
        await asyncio.sleep(0.3)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, stderr = await asyncio.wait_for(proc.communicate(), 30)
        assert time.monotonic() - t0 < 5
        assert proc.returncode == 130, stderr.decode()
    (path,) = find_cassettes([out])
    reader = CassetteReader(path)
    list(reader)
    assert reader.header.run.id
