"""End to end: record the built-in catalog from the simulator (oracle and every flawed profile) through the real
proxy, then rescore offline. The oracle scores 100%; each flawed profile yields exactly its failure type; on Chat
Completions and on the Responses API alike."""

from __future__ import annotations

from collections import defaultdict

import pytest

from bench.catalog.driver.config import RecordConfig
from bench.catalog.driver.record_run import record
from bench.catalog.sim import start_sim
from bench.catalog.sim.behaviours import BEHAVIOURS
from bench.scorer.checked_catalog import load_catalog
from bench.scorer.results import Result
from tests.support.rescored import rescored as rescore

# Profile → the failure type it is built to produce ("bad edit": the edit applies but breaks the code).
EXPECTED = {
    "flawed-invalid-json": "invalid_json",
    "flawed-text-tool-call": "text_tool_call",
    "flawed-no-call": "no_call",
    "flawed-wrong-tool": "wrong_tool",
    "flawed-unknown-tool": "unknown_tool",
    "flawed-call-limit": "call_limit",
    "flawed-patch-failed": "patch_failed",
    "flawed-bad-edit": "outcome_mismatch",
    "flawed-wrong-args": "wrong_args",
}
AGENT_SAMPLE = ("agent.fix_mean", "agent.fix_leap_year", "agent.find_version")


@pytest.fixture(scope="module", params=["chat", "responses"])
def scored(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> list[Result]:
    import asyncio

    api = request.param
    out = tmp_path_factory.mktemp("sim")
    catalog = load_catalog(None)

    # The flawed profiles change only replies that call tools, so they run on the tool suites (and three agent tasks
    # that cover edit_file, apply_patch and read-only work); the oracle runs on everything.
    flawed_tests = [t.id for t in catalog.select(["tools"])] + list(AGENT_SAMPLE)

    async def go() -> None:
        async with await start_sim(catalog=catalog) as sim:
            for models, tests in ((["oracle"], []), (list(EXPECTED), flawed_tests)):
                cfg = RecordConfig(upstream=sim.url, models=models, out=str(out), concurrency=16, tests=tests, api=api)
                await record(cfg, catalog)

    asyncio.run(go())
    _, results = rescore([out], catalog=catalog, jobs=2)
    endpoints = {r.endpoint for r in results}
    assert endpoints == {"chat.completions" if api == "chat" else "responses"}
    return results


def test_every_profile_is_covered() -> None:
    assert set(EXPECTED) == set(BEHAVIOURS) - {"oracle"}


def test_oracle_scores_full_marks(scored: list[Result]) -> None:
    oracle = [r for r in scored if r.model == "oracle"]
    assert len(oracle) == len(load_catalog(None).tests)
    bad = [(r.test, r.status, r.score, r.checks) for r in oracle if not r.passed]
    assert not bad


def test_each_flawed_profile_yields_exactly_its_failure_type(scored: list[Result]) -> None:
    types: dict[str, set[str]] = defaultdict(set)
    failed: dict[str, int] = defaultdict(int)
    for r in scored:
        if r.model in EXPECTED:
            assert r.status == "scored", (r.model, r.test, r.status)
            if not r.passed:
                types[r.model].add(r.failure_type)
                failed[r.model] += 1
    wrong = {m: sorted(t) for m, t in types.items() if t != {EXPECTED[m]}}
    assert not wrong
    assert set(failed) == set(EXPECTED), "every profile fails at least one test"


def test_calls_are_compared_with_the_reference_solution(scored: list[Result]) -> None:
    tool_tests = {t.id for t in load_catalog(None).tests.values() if t.tools or t.workspace is not None}
    oracle = {r.test: r.calls for r in scored if r.model == "oracle"}
    # The oracle replays each reference: the same calls, test by test; tests without tools get no comparison.
    assert {t for t, c in oracle.items() if c is not None} == tool_tests
    assert {c.verdict for c in oracle.values() if c is not None} == {"same"}
    by = {(r.model, r.test): r.calls for r in scored if r.calls is not None}
    # The looping model calls more than the reference; the prose answerer fewer; a call to a tool never offered
    # is as many calls to another tool.
    loop = by[("flawed-call-limit", "agent.fix_mean")]
    assert loop is not None and loop.verdict == "more" and loop.made > loop.reference == 3
    silent = by[("flawed-no-call", "tools.weather_paris")]
    assert silent is not None and (silent.verdict, silent.made, silent.missing) == ("fewer", 0, ["get_weather"])
    unknown = by[("flawed-unknown-tool", "tools.weather_paris")]
    assert unknown is not None and (unknown.verdict, unknown.missing, unknown.extra) == (
        "different",
        ["get_weather"],
        ["run_shell"],
    )
