"""Promises of docs/record.md that no other test held: piped progress lines and `--quiet`, the run header's version and
start time, and `bench doctor`'s exit code (1 only when a required check fails)."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import os
import re
import socket
import sys
from pathlib import Path

import pytest

from bench import __version__
from bench.catalog.driver import progress
from bench.catalog.driver.progress import PlainLines
from bench.catalog.driver.record_run import record
from bench.catalog.model import Catalog
from bench.catalog.sim import start_sim
from bench.core.cassette import CassetteReader, find_cassettes
from bench.scorer.checked_catalog import load_catalog
from tests.catalog.driver.test_record_run import cfg_for

ROOT = Path(__file__).resolve().parents[3]
TESTS = "tools.weather_paris,tools.capital_no_tool"


def test_piped_progress_is_a_line_every_n_results_and_every_minute(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    out = io.StringIO()
    lines = PlainLines(every=3, stream=out)
    lines.start(total=7)
    for ok in (True, False, True, True):  # the 3rd result prints, the 4th does not
        lines.advance(ok)
    now[0] += 61  # a minute without a line: the next result prints whatever its count
    lines.advance(True)
    lines.advance(True)  # the 6th: a multiple of 3
    lines.advance(True)  # the last always prints
    assert out.getvalue().splitlines() == [
        "bench record: 3/7 done, 1 errors, 0s elapsed, ETA 0s",
        "bench record: 5/7 done, 1 errors, 61s elapsed, ETA 24s",
        "bench record: 6/7 done, 1 errors, 61s elapsed, ETA 10s",
        "bench record: 7/7 done, 1 errors, 61s elapsed, ETA 0s",
    ]


async def bench_record(tmp_path: Path, url: str, *flags: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench", "record", "--upstream", url, "--model", "oracle", "--tests", TESTS,
        "--out", str(tmp_path / "out"), *flags, cwd=ROOT, env={**os.environ, "BENCH_API_KEY": "sk-record-0123456789"},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    stdout, stderr = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, stdout.decode(), stderr.decode()


async def test_piped_bench_record_prints_progress_every_n_results_and_quiet_prints_none(tmp_path: Path) -> None:
    config = tmp_path / "bench.yaml"
    config.write_text("progress_every: 1\n")
    async with await start_sim(catalog=load_catalog(None)) as sim:
        rc, _, stderr = await bench_record(tmp_path, sim.url, "--config", str(config))
        assert rc == 0, stderr
        assert re.findall(r"^bench record: (\d/\d) done, 0 errors", stderr, re.M) == ["1/2", "2/2"]
        rc, _, stderr = await bench_record(tmp_path, sim.url, "--quiet")
        assert rc == 0, stderr
        assert "done, " not in stderr
    assert len(find_cassettes([tmp_path / "out"])) == 2


async def test_the_run_header_names_the_bench_version_and_when_it_started(tmp_path: Path, mini: Catalog) -> None:
    before = dt.datetime.now(dt.UTC)
    async with await start_sim(catalog=mini) as sim:
        summary = await record(cfg_for(sim.url, tmp_path, ["oracle"], tests=["t.text"]), mini)
    assert summary.cassette is not None
    run = CassetteReader(summary.cassette).header.run
    assert run.bench_version == __version__ and run.started is not None
    started = dt.datetime.fromisoformat(run.started)
    assert started.tzinfo is not None and before <= started <= dt.datetime.now(dt.UTC)
    assert not run.resumed_from


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def bench_doctor(url: str, model: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench", "doctor", "--upstream", url, "--model", model, cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    stdout, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, stdout.decode()


async def test_doctor_exits_1_only_when_a_required_check_fails() -> None:
    # Unreachable: a required check fails.
    rc, out = await bench_doctor(f"http://127.0.0.1:{closed_port()}", "oracle")
    assert rc == 1, out
    # A model that never calls a tool: the tool-call check fails, but it is only a warning.
    async with await start_sim(catalog=load_catalog(None)) as sim:
        rc, out = await bench_doctor(sim.url, "flawed-no-call")
        assert rc == 0, out
        assert "tool call" in out
        rc, out = await bench_doctor(sim.url, "oracle")
    assert rc == 0, out
