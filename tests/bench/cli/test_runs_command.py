"""`bench runs`: one line per run id (a resumed run's cassettes together), with its models, epochs, results and
exchanges, and when; a bare proxy's cassette is a line of its own."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.catalog.driver.config import RecordConfig
from bench.catalog.driver.record_run import record
from bench.catalog.sim import start_sim
from bench.cli import main
from bench.proxy import start_proxy
from bench.scorer.checked_catalog import load_catalog

TESTS = ["tools.weather_paris", "math.multiply", "extract.email_address"]


def test_runs_lists_runs_not_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    catalog = load_catalog(None)
    assert set(TESTS) <= set(catalog.tests)

    async def go() -> tuple[str, str]:
        async with await start_sim(catalog=catalog) as sim:
            two = RecordConfig(upstream=sim.url, models=["oracle", "flawed-no-call"], epochs=2, out=str(tmp_path))
            two.tests = TESTS
            first = await record(two, catalog)
            # Resumed with one more test: only its jobs are recorded, into a second cassette of the same run.
            two.tests = [*TESTS, "math.subtract"]
            await record(two, catalog, resume=first.run_id)
            one = RecordConfig(upstream=sim.url, models=["oracle"], epochs=1, out=str(tmp_path), tests=TESTS[:1])
            second = await record(one, catalog)
            # A bare proxy's cassette: no run id, listed on its own.
            proxy = await start_proxy(upstream=sim.url, cassettes=tmp_path / "bare")
            await proxy.close()
        return first.run_id, second.run_id

    first, second = asyncio.run(go())
    assert main(["runs", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3, lines
    by_run = {line.split()[0]: line for line in lines}
    # 4 tests x 2 models x 2 epochs = 16 results over the run's two cassettes; the gateway check's requests are not
    # results.
    assert "models: flawed-no-call, oracle  epochs: 2  results: 16" in by_run[first]
    assert by_run[first].endswith("cassettes: 2")
    assert "models: oracle  epochs: 1  results: 1" in by_run[second]
    assert any(line.startswith("(no run id) rec-") and "exchanges: 0" in line for line in lines)
    assert main(["runs", str(tmp_path / "none-here")]) == 1  # a missing folder: one line, exit 1


def test_a_run_of_workers_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bench.core.cassette import CassetteWriter
    from bench.core.cassette.records import Shard
    from tests.support.records import exchange

    for k, n in ((0, 2), (1, 3)):
        w = CassetteWriter(tmp_path / f"rec-1-w{k}.cassette", shard=Shard(run="rec-1", index=k, count=2))
        for i in range(n):
            w.put(exchange(id=f"x{i}"))
        w.close()
    w = CassetteWriter(tmp_path / "rec-2.cassette")  # a one-process proxy's: a line of its own
    w.close()
    assert main(["runs", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2, lines
    workers = next(line for line in lines if line.startswith("(no run id) rec-1 (2 workers)"))
    assert "exchanges: 5" in workers and workers.endswith("cassettes: 2")
    assert any(line.startswith("(no run id) rec-2.cassette") for line in lines)
