"""The OpenAI Agents SDK (Responses API, its default) runs a two-tool agent through `bench proxy` against the
simulator, then again through replay with the simulator stopped: same final output. The recordings are then rescored
with a rules file and reported."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI

from bench.catalog.sim import start_sim
from bench.cli import main
from bench.core.cassette import CassetteReader, find_cassettes
from bench.core.parse import parse_exchange
from bench.proxy.server import start_proxy
from bench.scorer.results import TrafficLine
from bench.scorer.scores_io import read_scores

RULES = """
rules:
  - id: agent.calls_both_tools
    match: {endpoint: responses, tools: [get_weather, get_time]}
    checks:
      - evaluator: total_under
        args: {ms: 10000}
  - id: agent.final_answer_mentions_tools
    match: {endpoint: responses, request: "function_call_output|sunny"}
    checks:
      - evaluator: contains_all
        args: {values: ["sunny"]}
"""


def build_agent(base_url: str) -> Any:
    # Imported here, not at the top: every xdist worker collects this file, one runs it (~1 s of import each).
    from agents import Agent, OpenAIResponsesModel, function_tool, set_tracing_disabled

    set_tracing_disabled(True)  # no trace export: the test touches 127.0.0.1 only

    @function_tool
    def get_weather(city: str) -> str:
        """Weather for a city."""
        return f"sunny in {city}"

    @function_tool
    def get_time(city: str) -> str:
        """Local time in a city."""
        return f"noon in {city}"

    client = AsyncOpenAI(base_url=base_url, api_key="sk-any", max_retries=0)
    model = OpenAIResponsesModel(model="oracle", openai_client=client)
    return Agent(name="helper", instructions="Use the tools.", tools=[get_weather, get_time], model=model)


async def run_agent(base_url: str, streamed: bool) -> str:
    from agents import Runner

    agent = build_agent(base_url)
    if streamed:
        result = Runner.run_streamed(agent, "Weather and time in Paris?")
        async for _ in result.stream_events():
            pass
        return str(result.final_output)
    done = await Runner.run(agent, "Weather and time in Paris?")
    return str(done.final_output)


@pytest.mark.parametrize("streamed", [False, True])
async def test_two_tool_agent_records_replays_and_is_scored(tmp_path: Path, streamed: bool) -> None:
    cassettes = tmp_path / "cassettes"
    async with await start_sim() as sim, await start_proxy(upstream=sim.url, cassettes=cassettes) as proxy:
        recorded = await run_agent(proxy.url + "/v1", streamed)
    # Both tools were called and their results reached the final answer.
    assert recorded.startswith("Done: ") and "sunny in" in recorded and "noon in" in recorded
    # The simulator is gone: replay alone serves the agent, which ends with the same output.
    async with await start_proxy(upstream=None, cassettes=cassettes, mode="replay", pace="instant") as replay:
        replayed = await run_agent(replay.url + "/v1", streamed)
    assert replayed == recorded

    records = [r for p in find_cassettes([cassettes]) for r in CassetteReader(p)]
    live = [r for r in records if r.mode == "record"]
    assert len(live) == 3 and all(r.request.path == "/v1/responses" for r in live)
    parsed = [parse_exchange(r) for r in sorted(live, key=lambda r: r.started)]
    assert [[c.name for c in p.tool_calls] for p in parsed] == [["get_weather"], ["get_time"], []]
    assert all(p.findings == [] and r.outcome == "complete" for p, r in zip(parsed, live, strict=True))
    assert parsed[-1].content == recorded

    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    assert main(["rescore", str(cassettes), "--rules", str(rules), "--jobs", "1"]) == 0
    out = tmp_path / "report.json"
    assert main(["report", str(cassettes), "--out", str(out)]) == 0
    body = json.loads(out.read_text())
    rows = body["traffic"]["rows"]
    assert {r["endpoint"] for r in rows} == {"responses"}
    assert sum(r["requests"] for r in rows) == 6  # three recorded, three replayed
    rates = {(r["scope"], r["group"]): r for r in body["rates"]}
    assert rates[("suite", "rules")]["counts"]["scored"] > 0

    # The agent's three calls are one session, linked by the tool-call ids each request carries; the replay is another.
    traffic: list[TrafficLine] = []
    read_scores(cassettes / "scores.jsonl", traffic=traffic)
    sessions: dict[str | None, list[TrafficLine]] = {}
    for line in traffic:
        sessions.setdefault(line.session, []).append(line)
    assert sorted(len(v) for v in sessions.values()) == [3, 3]
    for lines in sessions.values():
        assert [t.session_link for t in lines] == [None, "tool_call", "tool_call"]
        assert len({t.cassette for t in lines}) == 1
    assert body["traffic"]["sessions"]["sessions"] == 2 and body["traffic"]["sessions"]["exchanges"] == 6
