"""`bench catalog from-traffic`: an instructor run and an Agents SDK session recorded through the proxy (against the
simulator) become tests that `bench catalog validate` accepts and that pass when the recording is rescored with
them; the same from the recording exported as OTel GenAI traces; what a test cannot hold is left out and counted."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import instructor
import pytest
import yaml
from openai import AsyncOpenAI
from pydantic import BaseModel

from bench.catalog.sim import start_sim
from bench.cli import main
from bench.proxy.server import start_proxy
from bench.scorer.results import Result
from bench.scorer.scores_io import read_scores
from tests.e2e.test_agents_sdk import run_agent


class Weather(BaseModel):
    city: str
    degrees: int


async def _instructor(base_url: str) -> None:
    client = instructor.from_openai(
        AsyncOpenAI(base_url=base_url, api_key="sk-any", max_retries=0), mode=instructor.Mode.TOOLS
    )
    await client.chat.completions.create(
        model="oracle",
        response_model=Weather,
        max_retries=2,
        temperature=0,
        seed=7,
        max_tokens=64,
        messages=[{"role": "user", "content": "Paris is 21 degrees today. Extract the weather."}],
    )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("traffic")

    async def record() -> None:
        async with await start_sim() as sim, await start_proxy(upstream=sim.url, cassettes=out) as proxy:
            await _instructor(proxy.url + "/v1")
            await run_agent(proxy.url + "/v1", streamed=False)
            await _instructor(proxy.url + "/v1")  # the same request again: one test, not two

    asyncio.run(record())
    return out


def _suite(folder: Path) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((folder / "from_traffic.yaml").read_text())
    return doc


def _rescored(cassettes: Path, catalog: Path, out: Path) -> list[Result]:
    assert main(["rescore", str(cassettes), "--catalog", str(catalog), "--jobs", "1", "--out", str(out)]) == 0
    return read_scores(out)[1]


def test_drafts_from_cassettes_validate_and_pass_against_the_recording(recorded: Path, tmp_path: Path) -> None:
    drafts = tmp_path / "drafts"
    assert main(["catalog", "from-traffic", str(recorded), "--out", str(drafts)]) == 0
    tests = {t["id"]: t for t in _suite(drafts)["tests"]}
    assert sorted(tests) == ["paris_is_21_degrees_today_extract", "weather_and_time_in_paris"]
    extract = tests["paris_is_21_degrees_today_extract"]
    assert extract["messages"] == [{"role": "user", "content": "Paris is 21 degrees today. Extract the weather."}]
    assert [t["function"]["name"] for t in extract["tools"]] == ["Weather"]
    assert extract["params"]["tool_choice"] == {"type": "function", "function": {"name": "Weather"}}
    assert {c["evaluator"] for c in extract["checks"]} == {"tool_called", "tool_args"}
    agent = tests["weather_and_time_in_paris"]
    assert agent["limits"] == {"max_turns": 3, "max_calls": 2}
    assert [[c["name"] for c in turn] for turn in agent["reference"]["turns"]] == [["get_weather"], ["get_time"]]
    assert agent["reference"]["answer"].startswith("Done: ")
    assert main(["catalog", "validate", str(drafts)]) == 0

    results = _rescored(recorded, drafts, tmp_path / "scores.jsonl")
    by_test: dict[str, list[Result]] = {}
    for r in results:
        by_test.setdefault(r.test, []).append(r)
    assert sorted(by_test) == [
        "from_traffic.paris_is_21_degrees_today_extract",
        "from_traffic.weather_and_time_in_paris",
    ]
    assert len(by_test["from_traffic.paris_is_21_degrees_today_extract"]) == 2  # both runs, as two epochs
    assert all(r.status == "scored" and r.passed for r in results), [(r.test, r.checks) for r in results]
    (session,) = by_test["from_traffic.weather_and_time_in_paris"]
    assert len(session.exchanges) == 3


def test_drafts_from_exported_traces_match_the_recording_too(recorded: Path, tmp_path: Path) -> None:
    traces = tmp_path / "traces.jsonl"
    argv = ["export", str(recorded), "--format", "otlp", "--out", str(traces), "--content", "--signals", "traces"]
    assert main(argv) == 0
    drafts = tmp_path / "drafts"
    assert main(["catalog", "from-traffic", str(traces), "--out", str(drafts), "--suite", "traced"]) == 0
    suite: dict[str, Any] = yaml.safe_load((drafts / "traced.yaml").read_text())
    assert sorted(t["id"] for t in suite["tests"]) == ["paris_is_21_degrees_today_extract", "weather_and_time_in_paris"]
    assert main(["catalog", "validate", str(drafts)]) == 0
    results = _rescored(recorded, drafts, tmp_path / "scores.jsonl")
    assert {r.test for r in results} == {"traced.paris_is_21_degrees_today_extract", "traced.weather_and_time_in_paris"}
    assert all(r.passed for r in results)


def test_what_a_test_cannot_hold_is_left_out_and_counted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "requests.jsonl"
    pair = {"messages": [{"role": "user", "content": "Say hi."}], "model": "m"}
    parts = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}
    lines = [
        {"request": pair, "response": {"choices": [{"message": {"content": "Hi!"}, "finish_reason": "stop"}]}},
        {"request": {"model": "m", "messages": [parts]}, "response": {"choices": [{"message": {"content": "A dot."}}]}},
        {"request": {"model": "m", "messages": [{"role": "user", "content": "x"}]}, "response": {"error": {"code": 1}}},
    ]
    log.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    drafts = tmp_path / "drafts"
    assert main(["catalog", "from-traffic", str(log), "--out", str(drafts)]) == 0
    out = capsys.readouterr().out
    assert "left out 1 conversation(s): an exchange failed" in out
    assert "left out 1 conversation(s): messages a catalog test cannot hold exactly" in out
    (test,) = _suite(drafts)["tests"]
    assert test["checks"] == [{"evaluator": "equals", "args": {"value": "Hi!"}}]
    assert main(["catalog", "from-traffic", str(tmp_path / "nothing.jsonl"), "--out", str(drafts)]) == 1
    assert "nothing.jsonl: no such file or folder" in capsys.readouterr().err
