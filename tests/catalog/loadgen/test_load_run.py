"""Whole `bench load` runs against the simulator through the real in-process proxy: every exchange recorded with its
level, phase, due time and lateness; open-loop arrivals on the asked schedule; fixed concurrency never exceeded;
a sweep's levels in GuideLLM's order. Times are asserted only as the schedule says them (tags), never as measured."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import orjson
import pytest

from bench.catalog.loadgen.levels import Bounds, parse_span
from bench.catalog.loadgen.load_run import LoadConfig, run_load
from bench.catalog.loadgen.sources import source
from bench.catalog.loadgen.work import SourceOptions
from bench.catalog.model import Catalog
from bench.catalog.sim import start_sim
from bench.core.cassette import CassetteReader
from bench.core.cassette.records import Exchange, Header
from bench.core.errors import BenchError


def read(path: Path | None) -> tuple[Header, list[Exchange]]:
    assert path is not None
    reader = CassetteReader(path)
    return reader.header, sorted(reader, key=lambda e: (int(e.tags["level"]), e.started))


def synthetic(spec: str = "input=8,output=4", **kw: object) -> object:
    return iter(source("synthetic").build(SourceOptions(arg=spec, models=("oracle",), **kw)))  # type: ignore[arg-type]


async def test_open_loop_levels_are_tagged_with_their_schedule_and_phases(tmp_path: Path) -> None:
    bounds = Bounds(requests=20, warmup=parse_span("10%", ""), cooldown=parse_span("10%", ""))
    async with await start_sim(catalog=None) as sim:
        cfg = LoadConfig(
            upstream=sim.url, models=["oracle"], levels="rate", values=[50.0, 100.0], arrival="constant",
            bounds=bounds, out=str(tmp_path), slo={"ttft": 200.0},
        )  # fmt: skip
        summary = await run_load(cfg, synthetic(), log=lambda _: None)  # type: ignore[arg-type]
    header, exchanges = read(summary.cassette)
    load = header.run.load
    assert header.run.driver == "bench load" and header.run.id == summary.run_id
    assert load.levels == "rate 50,100" and load.arrival == "constant" and load.requests == 20  # type: ignore[union-attr]
    assert load.warmup == "10%" and load.slo == {"ttft": 200.0}  # type: ignore[union-attr]
    assert len(exchanges) == 40 and all(e.tags["run"] == summary.run_id for e in exchanges)
    for level, rate in ((0, 50), (1, 100)):
        mine = [e for e in exchanges if e.tags["level"] == str(level)]
        assert {e.tags["load"] for e in mine} == {f"rate={rate}"}
        # Due every 1/rate s from the level's start, whatever the machine did: the schedule is in the tags.
        assert sorted(int(e.tags["at"]) for e in mine) == [round(i / rate * 1e6) for i in range(20)]
        assert all(int(e.tags["late"]) >= 0 for e in mine)
        phases = Counter(e.tags["phase"] for e in mine)
        assert phases == {"warmup": 2, "measure": 16, "cooldown": 2}
        by_due = sorted(mine, key=lambda e: int(e.tags["at"]))
        assert [e.tags["phase"] for e in by_due[:2]] == ["warmup"] * 2 and by_due[-1].tags["phase"] == "cooldown"
    assert [(r.level.label, len(r.sent)) for r in summary.levels] == [("rate=50", 20), ("rate=100", 20)]
    assert all(s.late_s is not None and s.ok for r in summary.levels for s in r.sent)


async def test_fixed_concurrency_is_never_exceeded_and_has_no_schedule(tmp_path: Path) -> None:
    async with await start_sim(catalog=None, ttft_ms=20) as sim:
        cfg = LoadConfig(
            upstream=sim.url, models=["oracle"], levels="concurrency", values=[1.0, 3.0],
            bounds=Bounds(requests=9), out=str(tmp_path),
        )  # fmt: skip
        summary = await run_load(cfg, synthetic(), log=lambda _: None)  # type: ignore[arg-type]
        most = sim.stats.max_in_flight_total
    _, exchanges = read(summary.cassette)
    assert Counter(e.tags["load"] for e in exchanges) == {"concurrency=1": 9, "concurrency=3": 9}
    assert most <= 3 and not any("at" in e.tags or "late" in e.tags for e in exchanges)


async def test_a_sweep_runs_synchronous_then_throughput_then_rates_between(tmp_path: Path) -> None:
    async with await start_sim(catalog=None, ttft_ms=5) as sim:
        cfg = LoadConfig(
            upstream=sim.url, models=["oracle"], levels="sweep", values=[4.0], throughput_concurrency=4,
            bounds=Bounds(requests=8), out=str(tmp_path), arrival="constant",
        )  # fmt: skip
        summary = await run_load(cfg, synthetic(), log=lambda _: None)  # type: ignore[arg-type]
    kinds = [r.level.kind for r in summary.levels]
    assert kinds == ["synchronous", "throughput", "rate", "rate"]
    low, high = summary.levels[0].request_rate(), summary.levels[1].request_rate()
    rates = [r.level.value for r in summary.levels[2:]]
    # linspace(low, high, 3) without its first point (GuideLLM), whichever of the two measured higher.
    lo, hi = sorted((low, high))
    assert rates == pytest.approx([(lo + hi) / 2, hi])
    _, exchanges = read(summary.cassette)
    assert [e.tags["level"] for e in exchanges] == [str(i) for i in range(4) for _ in range(8)]


async def test_catalog_work_is_tagged_for_scoring_and_with_its_level(mini: Catalog, tmp_path: Path) -> None:
    work = iter(source("catalog").build(SourceOptions(models=("oracle",), catalog=mini)))
    async with await start_sim(catalog=mini) as sim:
        cfg = LoadConfig(
            upstream=sim.url, models=["oracle"], levels="concurrency", values=[2.0],
            bounds=Bounds(requests=2 * len(mini.tests)), out=str(tmp_path),
        )  # fmt: skip
        summary = await run_load(cfg, work, catalog=mini, log=lambda _: None)
    header, exchanges = read(summary.cassette)
    assert header.run.tests == {t.id: t.hash for t in mini.tests.values()}
    # Every test twice: epochs 0 and 1, each conversation its own result; every turn carries the level.
    firsts = [e for e in exchanges if e.tags["turn"] == "0"]
    assert Counter((e.tags["test"], e.tags["epoch"]) for e in firsts) == {
        (t, str(epoch)): 1 for t in mini.tests for epoch in (0, 1)
    }
    assert all(e.tags["level"] == "0" and e.tags["load"] == "concurrency=2" for e in exchanges)
    assert all(r.ok for r in summary.levels[0].sent)


async def test_every_request_failing_stops_the_run_with_one_line(tmp_path: Path) -> None:
    async with await start_sim(catalog=None) as sim:
        cfg = LoadConfig(
            upstream=sim.url, models=["no-such-model"], levels="rate", values=[100.0, 200.0],
            bounds=Bounds(requests=3), out=str(tmp_path),
        )  # fmt: skip
        work = iter(source("synthetic").build(SourceOptions(arg="input=4,output=2", models=("no-such-model",))))
        with pytest.raises(BenchError, match="every request failed"):
            await run_load(cfg, work, log=lambda _: None)
    # The cassette is closed and holds the first level's three failures.
    (cassette,) = tmp_path.glob("*.cassette")
    reader = CassetteReader(cassette)
    assert [e.response.status for e in reader] == [404, 404, 404] and reader.end is not None


def test_synthetic_bodies_ask_for_their_lengths() -> None:
    work = synthetic("input=5..9,output=3", extra={"ignore_eos": "1"}, seed=3)
    bodies = [orjson.loads(next(work).body) for _ in range(50)]  # type: ignore[call-overload]
    words = {len(b["messages"][0]["content"].split()) for b in bodies}
    assert words <= set(range(5, 10)) and len(words) > 1
    assert all(b["max_tokens"] == b["min_tokens"] == 3 and b["ignore_eos"] is True and b["stream"] for b in bodies)
