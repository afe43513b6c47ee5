"""Recording against the simulator through the real in-process proxy."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
import zstandard

from bench.catalog.driver.config import RecordConfig
from bench.catalog.driver.doctor import diagnose
from bench.catalog.driver.record_run import record
from bench.catalog.model import Catalog
from bench.catalog.sim import start_sim
from bench.core.cassette import CassetteReader
from bench.core.errors import BenchError
from bench.scorer.checked_catalog import load_catalog

SECRET = "sk-bench-test-secret-0123456789"


def cfg_for(url: str, out: Path, models: list[str], **kw: object) -> RecordConfig:
    cfg = RecordConfig(upstream=url, models=models, out=str(out), backoff_base=0.01, backoff_max=0.05)
    for k, v in kw.items():
        setattr(cfg, k, v)
    return cfg


async def test_builtin_catalog_with_faults_every_test_tagged_and_failed_attempts_kept(tmp_path: Path) -> None:
    catalog = load_catalog(None)
    # Retry-After: 0, so each retry waits only the test's 10-50 ms backoff (the default 1 s made this test 16 s).
    model = "oracle+500:0+truncate"
    async with await start_sim(catalog=catalog, api_key=SECRET) as sim:
        cfg = cfg_for(sim.url, tmp_path, [model], api_key=SECRET)
        summary = await record(cfg, catalog)
    assert summary.errors == 0 and summary.done == len(catalog.tests) and not summary.interrupted
    assert summary.cassette is not None
    reader = CassetteReader(summary.cassette)
    exchanges = list(reader)
    assert reader.end is not None and not reader.end.interrupted
    run = reader.header.run
    assert run.id == summary.run_id and run.catalog_hash == catalog.hash
    assert run.tests == {t.id: t.hash for t in catalog.tests.values()}
    assert run.config is not None and run.config["api_key_set"] is True and "api_key" not in run.config
    tags = [e.tags for e in exchanges]
    assert {t["test"] for t in tags} == set(catalog.tests)
    assert all(t["run"] == summary.run_id and t["model"] == model and t["epoch"] == "0" for t in tags)
    # Every request meets a 500, then a truncated stream, then succeeds: three recorded attempts per turn.
    attempts = Counter(t["attempt"] for t in tags)
    assert attempts["1"] == attempts["2"] == attempts["3"] > 0 and "4" not in attempts
    first = [e for e in exchanges if e.tags["attempt"] == "1"]
    assert all(e.response.status == 500 for e in first)
    second = [e for e in exchanges if e.tags["attempt"] == "2"]
    assert all(e.outcome == "truncated" or e.response.status == 200 for e in second)
    multi = {t["test"] for t in tags if t["turn"] != "0"}
    assert multi == {t.id for t in catalog.tests.values() if t.multi_turn}
    raw = zstandard.ZstdDecompressor().decompressobj().decompress(summary.cassette.read_bytes())
    assert SECRET.encode() not in raw


async def test_model_caps_hold_without_starving_others(tmp_path: Path, mini: Catalog) -> None:
    async with await start_sim(catalog=mini, ttft_ms=30) as sim:
        cfg = cfg_for(sim.url, tmp_path, ["oracle", "flawed-no-call"], epochs=6, concurrency=6)
        cfg.model_concurrency = {"oracle": 1}
        summary = await record(cfg, mini)
    assert summary.done == 2 * 6 * len(mini.tests)
    assert sim.stats.max_in_flight["oracle"] == 1
    assert sim.stats.max_in_flight["flawed-no-call"] > 1


async def test_retry_after_is_honoured(tmp_path: Path, mini: Catalog) -> None:
    async with await start_sim(catalog=mini) as sim:
        cfg = cfg_for(sim.url, tmp_path, ["oracle+429:1"], tests=["t.text"])
        summary = await record(cfg, mini)
    assert summary.retries == 1 and summary.errors == 0
    (t1, *_), (t2, *_) = sim.stats.log[-2:]  # before them: the pre-flight probe of the unlisted model name
    assert t2 - t1 >= 0.95  # Retry-After: 1, although the backoff alone would have waited 10 ms


async def test_idle_timeout_abandons_a_stalled_stream(tmp_path: Path, mini: Catalog) -> None:
    async with await start_sim(catalog=mini) as sim:
        cfg = cfg_for(sim.url, tmp_path, ["oracle+stall!"], tests=["t.text"], idle_timeout=0.3, max_retries=1)
        cfg.retry_timeouts = True
        t0 = time.monotonic()
        summary = await record(cfg, mini)
    assert time.monotonic() - t0 < 20
    assert summary.errors == 1 and "idle_timeout" in summary.failures[0]
    assert summary.cassette is not None
    exchanges = list(CassetteReader(summary.cassette))
    # The abandoned attempts are recorded too, each when the proxy saw its client leave: in the order they ended.
    assert sorted(e.tags["attempt"] for e in exchanges) == ["1", "2"]
    assert all(e.outcome != "complete" for e in exchanges)


async def test_preflight_failures(tmp_path: Path, mini: Catalog) -> None:
    async with await start_sim(catalog=mini, api_key=SECRET) as sim:
        with pytest.raises(BenchError, match="rejected the API key") as info:
            await record(cfg_for(sim.url, tmp_path, ["oracle"], api_key="sk-wrong"), mini)
        assert "sk-wrong" not in str(info.value)
        with pytest.raises(BenchError, match="unknown model 'gpt-nope'"):
            await record(cfg_for(sim.url, tmp_path, ["gpt-nope"], api_key=SECRET), mini)
        port = sim.url.rsplit(":", 1)[1]
    with pytest.raises(BenchError, match="cannot reach upstream"):
        await record(cfg_for(f"http://127.0.0.1:{port}", tmp_path, ["oracle"]), mini)
    assert not list(tmp_path.iterdir())  # nothing was started, so no cassette


async def test_doctor_checklist(mini: Catalog) -> None:
    async with await start_sim(catalog=mini) as sim:
        checks = await diagnose(sim.base_url, None, "oracle")
    assert {c.name: c.ok for c in checks} == {
        "models list": True,
        "server": False,  # the simulator is no serving engine bench knows: a warning, not a failure
        "streaming call": True,
        "usage in streams": True,
        "system_fingerprint": True,
        "tool call": True,
    }


async def test_resume_refuses_a_changed_catalog_and_skips_what_is_complete(tmp_path: Path, mini: Catalog) -> None:
    import dataclasses

    async with await start_sim(catalog=mini) as sim:
        cfg = cfg_for(sim.url, tmp_path, ["oracle"], tests=["t.text", "t.tool"])
        first = await record(cfg, mini)
        assert first.done == 2 and first.cassette is not None
        again = await record(cfg, mini, resume=first.run_id)
        assert again.skipped_complete == 2 and again.cassette is None  # nothing missing: nothing recorded
        changed = dataclasses.replace(mini.tests["t.tool"], hash="h-t.tool-edited")
        edited = dataclasses.replace(mini, tests={**mini.tests, "t.tool": changed})
        with pytest.raises(BenchError, match=r"the catalog changed since this run was recorded \(t\.tool\)"):
            await record(cfg, edited, resume=first.run_id)
        # A test outside the resumed selection may change freely.
        other = dataclasses.replace(mini.tests["t.multi"], hash="h-t.multi-edited")
        unrelated = dataclasses.replace(mini, tests={**mini.tests, "t.multi": other})
        assert (await record(cfg, unrelated, resume=first.run_id)).skipped_complete == 2
        with pytest.raises(BenchError, match="no cassette of run nope"):
            await record(cfg, mini, resume="nope")
    assert [p.name for p in tmp_path.glob("*.cassette")] == [first.cassette.name]


def test_category_filter_selects_with_the_suite_and_names_unknown_ones() -> None:
    from bench.catalog.driver.record_run import select_tests

    catalog = load_catalog(None)
    tools = select_tests(catalog, RecordConfig(categories=["tool_calling"]))
    assert tools and {t.category for t in tools} == {"tool_calling"}
    assert len(tools) == sum(t.category == "tool_calling" for t in catalog.tests.values())
    with pytest.raises(BenchError, match=r"unknown categor.*nope.*known: .*tool_calling"):
        select_tests(catalog, RecordConfig(categories=["nope"]))
    # A suite and a category that share no test select nothing: one line says which filters to check.
    with pytest.raises(BenchError, match="--category"):
        select_tests(catalog, RecordConfig(suites=["math"], categories=["tool_calling"]))


async def test_the_max_tokens_floor_keeps_a_low_budget_from_cutting_and_a_cut_is_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench.catalog.model import Reference
    from bench.cli import main
    from tests.catalog.conftest import make_test

    # A test asking for 3 tokens whose answer takes 7 (the simulator stops at max_tokens, as a server does).
    test = make_test("t.short", params={"max_tokens": 3}, reference=Reference(answer="Paris is the capital of France."))
    catalog = Catalog({test.id: test}, "h", tmp_path)
    finish = {}
    async with await start_sim(catalog=catalog) as sim:
        for floor in (4096, None):  # the default floor, and none
            out = tmp_path / str(floor)
            summary = await record(cfg_for(sim.url, out, ["oracle"], max_tokens_default=floor), catalog)
            assert summary.cassette is not None
            capsys.readouterr()
            assert main(["cassette", "show", str(summary.cassette)]) == 0
            finish[floor] = capsys.readouterr().out
    assert "finish_reason stop" in finish[4096] and "finish_reason length" not in finish[4096]
    assert "finish_reason length" in finish[None]
