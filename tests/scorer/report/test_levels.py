"""A load run's levels in the report, from hand-built traffic lines with known answers: which exchanges count, wall
time and throughput (vLLM's definitions), goodput and SLO attainment, error types, pass rate, saturation."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.catalog.loadgen.levels import Bounds
from bench.catalog.loadgen.load_run import LoadConfig, run_load
from bench.catalog.loadgen.sources import source
from bench.catalog.loadgen.work import SourceOptions
from bench.catalog.sim import start_sim
from bench.cli import main
from bench.core.cassette import CassetteReader
from bench.core.cassette.records import Exchange
from bench.core.errors import BenchError
from bench.scorer.checked_catalog import load_catalog
from bench.scorer.report import aggregate, load
from bench.scorer.report.levels import LevelsTally
from bench.scorer.report.slo import parse_slo
from bench.scorer.results import LoadTag, Result, TrafficLine

T0 = 1_700_000_000_000_000
ROOT = Path(__file__).resolve().parents[3]


def line(level: int, load: str, start_ms: float, end_ms: float, **kw: object) -> TrafficLine:
    phase = str(kw.pop("phase", "measure"))
    late = kw.pop("late_us", None)
    fields: dict[str, object] = {
        "ttft_us": 50_000, "e2el_us": round(end_ms * 1000) - 1000, "tpot_us": 5000.0, "output_tokens": 10,
        "input_tokens": 20, "status": 200, "outcome": "complete",
    }  # fmt: skip
    fields.update(kw)
    return TrafficLine(
        id=f"x{start_ms}", started=T0 + round(start_ms * 1000), end_us=round(end_ms * 1000),
        load=LoadTag(level=level, load=load, phase=phase, late_us=late),  # type: ignore[arg-type]
        **fields,  # type: ignore[arg-type]
    )  # fmt: skip


def test_a_level_s_figures_by_hand() -> None:
    tally = LevelsTally(parse_slo(["ttft:100", "e2el:500"]))
    for entry in [
        line(0, "rate=2", 0, 300, phase="warmup"),  # left out of every figure
        line(0, "rate=2", 500, 400, late_us=1000),  # good: ttft 50 ms, e2el 399 ms
        line(0, "rate=2", 1000, 700, late_us=3000, ttft_us=150_000),  # completed, ttft over the SLO
        line(0, "rate=2", 1500, 600, late_us=2000, e2el_us=599_000),  # completed, e2el over the SLO
        line(0, "rate=2", 2000, 100, status=429, failed=True, e2el_us=None, ttft_us=None, output_tokens=None),
        line(0, "rate=2", 2500, 2500, phase="cooldown"),
    ]:
        tally.traffic_line(entry)
    levels = tally.finish()
    assert levels is not None
    (row,) = levels.rows
    assert (row.requests, row.warmup, row.cooldown, row.completed, row.failed) == (4, 1, 1, 3, 1)
    assert row.errors == {"HTTP 429": 1}
    # Wall time: first measured start (500 ms) to last measured end (1500 + 600 ms): 1.6 s.
    assert row.wall_s == pytest.approx(1.6)
    assert row.sent_per_s == pytest.approx(3 / 1.5)  # 4 starts over 1.5 s
    assert row.request_throughput == pytest.approx(3 / 1.6)
    assert row.output_throughput == pytest.approx(30 / 1.6)  # completed requests' tokens
    assert row.total_throughput == pytest.approx((30 + 80) / 1.6)  # and every measured request's input
    assert row.good == 1 and row.goodput == pytest.approx(1 / 1.6) and row.slo_attainment == 0.25
    assert row.lateness_ms.count == 3 and row.lateness_ms.p50 == 2.0
    assert row.timing.ttft_ms.count == 3  # the failed one has none


def test_without_an_slo_every_completed_request_is_good_and_a_bad_slo_is_one_line() -> None:
    tally = LevelsTally({})
    tally.traffic_line(line(0, "concurrency=1", 0, 10_000))
    tally.traffic_line(line(0, "concurrency=1", 10_000, 20_000, failed=True, outcome="timeout"))
    levels = tally.finish()
    assert levels is not None
    row = levels.rows[0]
    assert row.good == 1 and row.slo_attainment == 0.5 and row.errors == {"timeout": 1}
    for bad in (["ttft"], ["ttft:x"], ["queue:5"], ["tpot:-1"]):
        with pytest.raises(BenchError, match="METRIC:MS"):
            parse_slo(bad)
    assert parse_slo(["ttft:200,tpot:50", "e2el:5000"]) == {"ttft": 200.0, "tpot": 50.0, "e2el": 5000.0}


def test_slo_reads_a_non_streamed_answer_s_ttft_as_its_end_and_a_one_token_answer_s_tpot_as_zero() -> None:
    tally = LevelsTally(parse_slo(["ttft:100", "tpot:1"]))
    tally.traffic_line(line(0, "rate=1", 0, 90, ttft_us=None, tpot_us=None, e2el_us=90_000))  # good
    tally.traffic_line(line(0, "rate=1", 1000, 200, ttft_us=None, tpot_us=None, e2el_us=200_000))  # ttft 200
    levels = tally.finish()
    assert levels is not None and levels.rows[0].good == 1


def test_pass_rate_per_level_from_the_catalog_s_results() -> None:
    tally = LevelsTally({})
    tally.traffic_line(line(3, "rate=8", 0, 10))
    for passed in (True, True, False):
        tally.result(Result(test="t", status="scored", passed=passed, level=3))
    tally.result(Result(test="t", status="errored", level=3))  # not scored: not in the rate
    tally.result(Result(test="t", status="scored", passed=True))  # not a load run's
    levels = tally.finish()
    assert levels is not None
    row = levels.rows[0]
    assert (row.scored, row.passed) == (3, 2) and row.pass_rate == pytest.approx(2 / 3)
    assert row.pass_low < 2 / 3 < row.pass_high


def _open_level(tally: LevelsTally, level: int, rate: float, service_s: float) -> None:
    """20 arrivals at `rate`, answered one at a time every `service_s` (a server that can do 1 / service_s)."""
    free = 0.0
    for i in range(20):
        at = i / rate
        free = max(free, at) + service_s
        tally.traffic_line(line(level, f"rate={rate:g}", at * 1000, (free - at) * 1000))


def test_saturation_is_between_the_last_rate_that_kept_up_and_the_first_that_did_not() -> None:
    tally = LevelsTally({})
    for level, rate in enumerate((4.0, 8.0, 12.0, 16.0)):
        _open_level(tally, level, rate, service_s=0.1)  # capacity: 10 requests per second
    levels = tally.finish()
    assert levels is not None
    s = levels.saturation
    # At 12/s the queue grows: of 19 arrival gaps' time (1.58 s) only 15 answers come back (0.79 < 0.9).
    assert (s.basis, s.kept_up, s.fell_behind) == ("rate", 8.0, 12.0)
    assert "between 8 req/s (kept up) and 12 req/s" in s.says
    assert levels.rows[2].completing_share == pytest.approx(15 / 19)
    assert [r.completing_share is not None and r.completing_share >= 0.9 for r in levels.rows] == [
        True, True, False, False,
    ]  # fmt: skip


def test_a_closed_loop_sweep_s_knee() -> None:
    tally = LevelsTally({})
    # Throughput 5, 9.5, 10, 10 req/s at concurrency 1, 2, 4, 8: the knee (90% of the highest) is at 2.
    for level, (conc, gap_ms) in enumerate(((1, 200), (2, 105.26), (4, 100), (8, 100))):
        for i in range(11):
            tally.traffic_line(line(level, f"concurrency={conc}", i * gap_ms, gap_ms if i == 10 else 1))
    levels = tally.finish()
    assert levels is not None
    assert (levels.saturation.basis, levels.saturation.kept_up) == ("concurrency", 2)
    assert levels.x_label.startswith("concurrency")


def test_tags_from_several_runs_in_one_level_are_warned_about() -> None:
    tally = LevelsTally({})
    tally.traffic_line(line(0, "rate=1", 0, 10))
    tally.traffic_line(line(0, "rate=5", 0, 10))
    levels = tally.finish()
    assert levels is not None and "several load runs" in levels.warnings[0]


def _hand_e2el_us(exchange: Exchange) -> int | None:
    """E2EL counted by hand from the recorded reads: the arrival of the read holding the finish_reason frame."""
    at = 0
    for chunk, delta in zip(exchange.response.chunks, exchange.response.chunk_us, strict=True):
        at += delta
        if b'"finish_reason":"' in chunk:
            return at
    return None


async def test_goodput_is_a_hand_count_of_the_recording_and_a_new_slo_needs_no_network(tmp_path: Path) -> None:
    out = tmp_path / "run"
    work = iter(source("synthetic").build(SourceOptions(arg="input=4,output=2..40", models=("oracle",), seed=2,
                                                        extra={"ignore_eos": "1"})))  # fmt: skip
    async with await start_sim(catalog=None, tokens_per_second=400) as sim:
        cfg = LoadConfig(
            upstream=sim.url, models=["oracle"], levels="rate", values=[40.0], arrival="constant",
            bounds=Bounds(requests=30), out=str(out),
        )  # fmt: skip
        await run_load(cfg, work, log=lambda _: None)
    # The sim and the proxy are gone; what follows reads the cassette only.
    (path,) = out.glob("*.cassette")
    hand = sorted(e2el for e in CassetteReader(path) if (e2el := _hand_e2el_us(e)) is not None)
    assert len(hand) == 30
    for bound_us in (hand[9], hand[20]):
        bound_ms = bound_us / 1000
        report = _offline_report(out, f"e2el:{bound_ms!r}", tmp_path / "r.json")
        (row,) = report["levels"]["rows"]
        assert row["good"] == sum(1 for v in hand if v <= bound_us) and row["requests"] == 30
        assert report["levels"]["slo"] == {"e2el": bound_ms}
    html = tmp_path / "r.html"
    assert main(["report", str(out), "--out", str(html)]) == 0
    page = html.read_text()
    for chart in ("throughput", "tokens", "ttft", "itl", "e2el", "shares", "late"):
        assert f'id="chart-load-{chart}"' in page
    ttft_chart = page.split('id="chart-load-ttft"')[1].split("</svg>")[0]
    assert ttft_chart.count('class="point"') == 2 and 'data-x="40"' in ttft_chart  # p50 and p99 at rate 40


def _offline_report(folder: Path, slo: str, out: Path) -> dict[str, Any]:
    """`bench report --slo` in a process with no network at all (its own empty network namespace)."""
    command = [sys.executable, "-m", "bench", "report", str(folder), "--slo", slo, "--out", str(out)]
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "-rn", "true"], capture_output=True).returncode != 0:
        pytest.skip("no unshare -rn here (a network namespace is how this test proves no network was used)")
    done = subprocess.run([unshare, "-rn", *command], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    body: dict[str, Any] = orjson.loads(out.read_bytes())
    return body


async def test_the_catalog_under_load_is_scored_per_level(tmp_path: Path) -> None:
    # The oracle answers every test right: each level's ten conversations (one epoch of the suite) all pass.
    catalog = load_catalog(None)
    options = SourceOptions(models=("oracle",), catalog=catalog, suites=("extract",))
    work = iter(source("catalog").build(options))
    async with await start_sim(catalog=catalog) as sim:
        cfg = LoadConfig(
            upstream=sim.url, models=["oracle"], levels="concurrency", values=[1.0, 3.0],
            bounds=Bounds(requests=10), out=str(tmp_path / "run"),
        )  # fmt: skip
        await run_load(cfg, work, catalog=catalog, log=lambda _: None)
    with load.stream(tmp_path / "run") as scores:
        report = aggregate.build(scores)
    assert report.levels is not None
    assert [(r.level, r.requests, r.scored, r.passed) for r in report.levels.rows] == [(0, 10, 10, 10), (1, 10, 10, 10)]
    assert [r.pass_rate for r in report.levels.rows] == [1.0, 1.0]
