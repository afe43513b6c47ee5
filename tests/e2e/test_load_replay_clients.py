"""Recorded traffic of real clients (the OpenAI Agents SDK on the Responses API, instructor forcing a tool) resent
by `bench load --replay-traffic` to two other backends on its recorded schedule: every body byte for byte (tools
and tool_choice intact), every arrival tagged with when it was due and how late it went, and `bench compare` on
the two replays compares the backends level by level."""

from __future__ import annotations

import json
from pathlib import Path

import instructor
import orjson
import pydantic
from openai import AsyncOpenAI

from bench.catalog.loadgen.levels import Bounds
from bench.catalog.loadgen.load_run import LoadConfig, run_load
from bench.catalog.loadgen.sources import source
from bench.catalog.loadgen.work import SourceOptions
from bench.catalog.sim import start_sim
from bench.cli import main
from bench.core.cassette import CassetteReader, find_cassettes
from bench.core.cassette.records import Exchange
from bench.proxy.server import start_proxy
from tests.e2e.test_agents_sdk import run_agent


class Weather(pydantic.BaseModel):
    city: str
    degrees: int


async def instructor_run(base_url: str) -> Weather:
    client = instructor.from_openai(AsyncOpenAI(base_url=base_url, api_key="sk-any", max_retries=0),
                                    mode=instructor.Mode.TOOLS)  # fmt: skip
    weather: Weather = await client.chat.completions.create(
        model="oracle",
        response_model=Weather,
        max_retries=1,
        messages=[{"role": "user", "content": "Paris is 21 degrees today. Extract the weather."}],
    )
    return weather


def recorded(folder: Path) -> list[Exchange]:
    return sorted((e for p in find_cassettes([folder]) for e in CassetteReader(p)), key=lambda e: e.started)


async def replay_to(upstream: str, recordings: Path, out: Path) -> list[Exchange]:
    work = iter(source("replay").build(SourceOptions(arg=str(recordings))))
    cfg = LoadConfig(upstream=upstream, models=[], levels="replay", values=[1.0], workload="replay", bounds=Bounds(),
                     out=str(out))  # fmt: skip
    summary = await run_load(cfg, work, log=lambda _: None)
    assert summary.levels[0].sent and all(s.ok for s in summary.levels[0].sent)
    return recorded(out)


async def test_agents_sdk_and_instructor_traffic_replayed_to_two_backends_and_compared(tmp_path: Path) -> None:
    recordings = tmp_path / "recorded"
    async with await start_sim(catalog=None) as first, await start_proxy(upstream=first.url, cassettes=recordings) as p:
        agent = await run_agent(p.url + "/v1", streamed=True)
        weather = await instructor_run(p.url + "/v1")
    assert agent.startswith("Done: ") and isinstance(weather, Weather)
    originals = recorded(recordings)
    assert {e.request.path for e in originals} == {"/v1/responses", "/v1/chat/completions"}

    async with await start_sim(catalog=None, ttft_ms=5) as fast, await start_sim(catalog=None, ttft_ms=150) as slow:
        on_fast = await replay_to(fast.url, recordings, tmp_path / "fast")
        on_slow = await replay_to(slow.url, recordings, tmp_path / "slow")
    for replayed in (on_fast, on_slow):
        in_order = sorted(replayed, key=lambda e: int(e.tags["at"]))
        assert [e.request.body for e in in_order] == [e.request.body for e in originals]
        # Due at the recorded offsets from the first request (speed 1), and each says how late it went.
        assert [int(e.tags["at"]) for e in in_order] == [e.started - originals[0].started for e in originals]
        assert all(int(e.tags["late"]) >= 0 for e in in_order)
    forced = [orjson.loads(e.request.body) for e in on_slow if e.request.path == "/v1/chat/completions"]
    assert forced and all(b["tool_choice"]["function"]["name"] == "Weather" and b["tools"] for b in forced)
    agents = [orjson.loads(e.request.body) for e in on_slow if e.request.path == "/v1/responses"]
    assert {t["name"] for b in agents for t in b["tools"]} == {"get_weather", "get_time"}

    out = tmp_path / "compare.json"
    code = main(["compare", str(tmp_path / "fast"), str(tmp_path / "slow"), "--format", "json", "--out", str(out)])
    assert code == 0
    deltas = {d["metric"]: d for d in json.loads(out.read_text())["levels"]["deltas"] if d["level"] == 0}
    assert deltas["E2EL p50"]["b"] > deltas["E2EL p50"]["a"]  # the second backend waits 150 ms before answering
    assert deltas["request throughput"]["load_a"] == "replay=1"
