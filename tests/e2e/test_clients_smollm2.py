"""Real clients against the real SmolLM2 server, through `bench proxy`: the OpenAI Agents SDK's chat-completions
model class and instructor (structured output through a forced tool call, re-asking on a validation error). Each
recording replays with the server gone, then is rescored with a rules file and reported."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import instructor
import pytest
from openai import AsyncOpenAI
from pydantic import BaseModel

from bench.cli import main
from bench.proxy import start_proxy
from bench.scorer.scores_io import read_scores

pytestmark = pytest.mark.llm

RULES = """
rules:
  - id: weather.tool_called
    match: {endpoint: chat.completions, tools: get_weather}
    checks:
      - evaluator: tool_called
        args: {name: get_weather}
  - id: weather.answer_is_json_call
    match: {endpoint: chat.completions, tools: Weather}
    checks:
      - evaluator: tool_called
        args: {name: Weather}
      - evaluator: tool_args
        args: {name: Weather, args: {city: {any: true}}}
"""


class Weather(BaseModel):
    city: str
    degrees: int


async def agents_run(base_url: str) -> str:
    # Imported here, not at the top: every xdist worker collects this file, one runs it (~1 s of import each).
    from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled

    set_tracing_disabled(True)  # no trace export: nothing leaves 127.0.0.1

    @function_tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return f"sunny in {city}"

    client = AsyncOpenAI(base_url=base_url, api_key="sk-any", max_retries=0)
    agent = Agent(
        name="weather",
        instructions="Answer with the weather tool.",
        tools=[get_weather],
        model=OpenAIChatCompletionsModel(model="smollm2", openai_client=client),
        model_settings=ModelSettings(tool_choice="get_weather", temperature=0, max_tokens=48),
        tool_use_behavior="stop_on_first_tool",
    )
    result = await Runner.run(agent, "What is the weather in Paris?", max_turns=3)
    return str(result.final_output)


async def instructor_run(base_url: str) -> str:
    client = instructor.from_openai(
        AsyncOpenAI(base_url=base_url, api_key="sk-any", max_retries=0), mode=instructor.Mode.TOOLS
    )
    try:
        weather = await client.chat.completions.create(
            model="smollm2",
            response_model=Weather,
            max_retries=2,
            temperature=0,
            seed=7,
            max_tokens=64,
            messages=[{"role": "user", "content": "Paris is 21 degrees today. Extract the weather."}],
        )
    except instructor.core.InstructorRetryException as exc:  # a 135M model may never get it right: still recorded
        return f"gave up after {exc.n_attempts} attempts"
    return weather.model_dump_json()


async def test_agents_chat_model_and_instructor_record_replay_and_score(smollm2: str, tmp_path: Path) -> None:
    upstream = smollm2.removesuffix("/v1")
    cassettes = tmp_path / "cassettes"
    async with await start_proxy(upstream=upstream, cassettes=cassettes) as proxy:
        agent_out = await agents_run(proxy.url + "/v1")
        extracted = await instructor_run(proxy.url + "/v1")
    assert agent_out.startswith("sunny in")
    async with await start_proxy(upstream=None, cassettes=cassettes, mode="replay", pace="instant") as replay:
        assert await agents_run(replay.url + "/v1") == agent_out
        assert await instructor_run(replay.url + "/v1") == extracted

    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    assert main(["rescore", str(cassettes), "--rules", str(rules), "--jobs", "1"]) == 0
    out = tmp_path / "report.json"
    assert main(["report", str(cassettes), "--out", str(out)]) == 0
    body: dict[str, Any] = json.loads(out.read_text())
    rows = body["traffic"]["rows"]
    assert {r["endpoint"] for r in rows} == {"chat.completions"}
    assert all(r["error_rate"] == 0 for r in rows)
    scored = {(r["scope"], r["group"]): r["counts"]["scored"] for r in body["rates"]}
    assert scored[("suite", "rules")] >= 2
    (tmp_path / "report.md").write_text("")
    assert main(["report", str(cassettes), "--out", str(tmp_path / "report.md")]) == 0

    # Tests drafted from the recording (instructor's forced call and its re-asks, the agent's call) validate, and the
    # recording rescored with them passes them.
    drafts = tmp_path / "drafts"
    assert main(["catalog", "from-traffic", str(cassettes), "--out", str(drafts)]) == 0
    assert main(["catalog", "validate", str(drafts)]) == 0
    scores = tmp_path / "drafted.jsonl"
    assert main(["rescore", str(cassettes), "--catalog", str(drafts), "--jobs", "1", "--out", str(scores)]) == 0
    _, results = read_scores(scores)
    drafted = {r.test for r in results}
    assert "from_traffic.paris_is_21_degrees_today_extract" in drafted
    assert all(r.status == "scored" and r.passed for r in results), [(r.test, r.checks) for r in results]
