"""Two load runs compared level by level: known answers for the intervals, and `bench compare` on real runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.catalog.loadgen.levels import Bounds
from bench.catalog.loadgen.load_run import LoadConfig, run_load
from bench.catalog.loadgen.sources import source
from bench.catalog.loadgen.work import SourceOptions
from bench.catalog.sim import start_sim
from bench.cli import main
from bench.scorer.report.levels_compare import SamplesTally, compare_levels, newcombe
from bench.scorer.results import LoadTag, TrafficLine


def test_newcombe_s_published_example() -> None:
    # Newcombe (1998), example (a): 56/70 against 48/80, method 10: +0.0524 to +0.3339.
    pa, pb, low, high = newcombe(48, 80, 56, 70)  # type: ignore[misc]
    assert (pa, pb) == (0.6, 0.8) and round(low, 4) == 0.0524 and round(high, 4) == 0.3339


def _side(load: str, ttft_ms: float, n: int = 40, gap_ms: float = 100.0) -> SamplesTally:
    tally = SamplesTally({"ttft": 150.0})
    for i in range(n):
        tally.traffic_line(
            TrafficLine(
                id=f"x{i}", started=1_000_000 + round(i * gap_ms * 1000), end_us=200_000, status=200,
                ttft_us=round((ttft_ms + (i % 5)) * 1000), e2el_us=200_000, tpot_us=2000.0, output_tokens=10,
                load=LoadTag(level=0, load=load, phase="measure"),
            )
        )  # fmt: skip
    return tally


def test_a_shift_is_inside_its_interval_and_no_shift_inside_zero_s() -> None:
    a, same, slower = _side("rate=10", 100), _side("rate=10", 100), _side("rate=10", 200)
    deltas, warnings = compare_levels(a.levels, slower.levels)
    by = {d.metric: d for d in deltas}
    ttft = by["TTFT p50"]
    assert ttft.delta == pytest.approx(100.0) and ttft.low is not None and ttft.high is not None
    assert ttft.low <= 100.0 <= ttft.high and ttft.low > 0
    # Every request of A meets ttft:150, none of B's: attainment 100% -> 0%.
    assert by["SLO attainment"].a == 1.0 and by["SLO attainment"].b == 0.0 and by["SLO attainment"].high < 0  # type: ignore[operator]
    assert by["goodput"].b == 0.0 and not warnings
    # 40 completions over the wall time (3.9 s of starts + 0.2 s): the batch means' mean is completions / wall.
    assert by["request throughput"].a == pytest.approx(40 / 4.1)
    assert by["output token throughput"].a == pytest.approx(400 / 4.1)
    flat = {d.metric: d for d in compare_levels(a.levels, same.levels)[0]}
    for metric in ("TTFT p50", "request throughput", "E2EL p99", "error rate"):
        assert flat[metric].low <= 0 <= flat[metric].high  # type: ignore[operator]


def test_levels_of_other_loads_or_on_one_side_are_said() -> None:
    a, b = _side("rate=10", 100), _side("rate=20", 100)
    b.levels[1] = b.levels[0]
    _, warnings = compare_levels(a.levels, b.levels)
    assert any("rate=10 in A and rate=20 in B" in w for w in warnings)
    assert any("one side only" in w and "1" in w for w in warnings)


async def _run(url: str, out: Path) -> None:
    work = iter(source("synthetic").build(SourceOptions(arg="input=4,output=5", models=("oracle",))))
    cfg = LoadConfig(
        upstream=url, models=["oracle"], levels="concurrency", values=[1.0, 4.0], bounds=Bounds(requests=12),
        out=str(out),
    )  # fmt: skip
    await run_load(cfg, work, log=lambda _: None)


async def test_bench_compare_pairs_two_load_runs_level_by_level(tmp_path: Path) -> None:
    async with await start_sim(catalog=None, ttft_ms=10) as fast:
        await _run(fast.url, tmp_path / "a")
    async with await start_sim(catalog=None, ttft_ms=250) as slow:
        await _run(slow.url, tmp_path / "b")
    out = tmp_path / "compare.json"
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--slo", "ttft:40", "--format", "json",
                 "--out", str(out)]) == 0  # fmt: skip
    body = json.loads(out.read_text())
    deltas = body["levels"]["deltas"]
    assert body["levels"]["slo"] == {"ttft": 40.0}
    assert {d["level"] for d in deltas} == {0, 1} and {d["load_a"] for d in deltas} == {
        "concurrency=1",
        "concurrency=4",
    }
    ttft = [d for d in deltas if d["metric"] == "TTFT p50"]
    # The simulator waits 10 ms, then 250 ms, before the first token: B is slower at every level.
    assert all(d["delta"] > 0 and d["low"] > 0 for d in ttft)
