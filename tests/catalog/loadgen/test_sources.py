"""Workload sources: a JSONL dataset in its common shapes, and recorded traffic resent byte for byte on its recorded
schedule (tools and tool_choice included) to another backend."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest
from openai import AsyncOpenAI

from bench.catalog.loadgen.levels import Bounds
from bench.catalog.loadgen.load_run import LoadConfig, run_load
from bench.catalog.loadgen.sources import source
from bench.catalog.loadgen.work import LoadRequest, SourceOptions
from bench.catalog.sim import start_sim
from bench.core.cassette import CassetteReader
from bench.core.errors import BenchError
from bench.proxy.server import start_proxy

WEATHER = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
}


def dataset(tmp_path: Path, lines: list[bytes], **kw: object) -> list[LoadRequest]:
    path = tmp_path / "data.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    work = iter(source("dataset").build(SourceOptions(arg=str(path), **kw)))  # type: ignore[arg-type]
    return [next(work) for _ in range(len(lines) + 1)]  # type: ignore[misc]


def test_dataset_shapes(tmp_path: Path) -> None:
    body = b'{"model":"m1","messages":[{"role":"user","content":"hi"}],"stream":false,"tools":[],"seed":1}'
    sharegpt = orjson.dumps(
        {
            "conversations": [
                {"from": "system", "value": "be brief"},
                {"from": "human", "value": "first question"},
                {"from": "gpt", "value": "a five word long answer"},
                {"from": "human", "value": "second question, never sent"},
            ]
        }
    )
    got = dataset(
        tmp_path,
        [body, b'{"prompt": "tell me", "output_tokens": 7}', sharegpt, b'{"input": "hello"}'],
        models=("m2",),
    )
    assert got[0].body == body and got[0].path == "/v1/chat/completions"  # complete: sent byte for byte
    prompt = orjson.loads(got[1].body)
    assert prompt == {
        "model": "m2", "messages": [{"role": "user", "content": "tell me"}], "max_tokens": 7,
        "stream": True, "stream_options": {"include_usage": True},
    }  # fmt: skip
    share = orjson.loads(got[2].body)
    assert share["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "first question"},
    ]
    assert share["max_tokens"] == 5
    assert got[3].path == "/v1/responses" and orjson.loads(got[3].body)["model"] == "m2"
    assert got[4].body == body  # read again from the top


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b"not json", ":2: not JSON"),
        (b'[{"prompt": "x"}]', "jq -c"),
        (b'"text"', "not a JSON object"),
        (b'{"question": "x"}', "no messages, input, prompt or conversations"),
        (b'{"conversations": [{"from": "gpt", "value": "x"}]}', "without a human turn"),
    ],
)
def test_a_bad_dataset_line_is_named_before_the_run(tmp_path: Path, line: bytes, why: str) -> None:
    with pytest.raises(BenchError, match=why):
        dataset(tmp_path, [b'{"prompt": "fine"}', line], models=("m",))


def test_a_dataset_line_without_a_model_needs_one(tmp_path: Path) -> None:
    with pytest.raises(BenchError, match="--model"):
        dataset(tmp_path, [b'{"prompt": "fine"}'])


async def _record_client_traffic(upstream: str, cassettes: Path) -> None:
    """A client's tool-calling traffic through the proxy: a streamed request forcing a tool, then a plain one."""
    async with await start_proxy(upstream=upstream, cassettes=cassettes) as proxy:
        client = AsyncOpenAI(base_url=proxy.url + "/v1", api_key="sk-client-key-0123456789", max_retries=0)
        stream = await client.chat.completions.create(
            model="oracle",
            messages=[{"role": "user", "content": "weather in Oslo?"}],
            tools=[WEATHER],  # type: ignore[list-item]
            tool_choice={"type": "function", "function": {"name": "get_weather"}},
            stream=True,
        )
        async for _ in stream:
            pass
        await asyncio.sleep(0.05)
        await client.chat.completions.create(model="oracle", messages=[{"role": "user", "content": "hello"}])
        await client.close()


async def test_recorded_traffic_is_resent_byte_for_byte_on_its_schedule(tmp_path: Path) -> None:
    recorded_dir, replay_dir = tmp_path / "recorded", tmp_path / "replayed"
    async with await start_sim(catalog=None) as first:
        await _record_client_traffic(first.url, recorded_dir)
    (recorded_file,) = recorded_dir.glob("*.cassette")
    recorded = sorted(CassetteReader(recorded_file), key=lambda e: e.started)
    work = iter(source("replay").build(SourceOptions(arg=str(recorded_dir))))
    async with await start_sim(catalog=None, ttft_ms=5) as second:
        cfg = LoadConfig(
            upstream=second.url, models=[], levels="replay", values=[2.0], workload="replay",
            bounds=Bounds(), out=str(replay_dir),
        )  # fmt: skip
        summary = await run_load(cfg, work, log=lambda _: None)
        assert second.stats.requests["oracle"] == 2
    assert summary.cassette is not None
    replayed = sorted(CassetteReader(summary.cassette), key=lambda e: int(e.tags["at"]))
    assert [e.request.body for e in replayed] == [e.request.body for e in recorded]
    assert [e.request.path for e in replayed] == [e.request.path for e in recorded]
    sent = orjson.loads(replayed[0].request.body)
    assert sent["tools"] == [WEATHER] and sent["tool_choice"]["function"]["name"] == "get_weather"
    # Due at the recorded offsets over the speed (2): the schedule, not what the machine made of it.
    offsets = [e.started - recorded[0].started for e in recorded]
    assert [int(e.tags["at"]) for e in replayed] == pytest.approx([o / 2 for o in offsets], abs=1)
    assert all(e.tags["load"] == "replay=2" and int(e.tags["late"]) >= 0 for e in replayed)
    ua = [dict((k.lower(), v) for k, v in e.request.headers)["user-agent"] for e in replayed]
    assert all(u.startswith("AsyncOpenAI/Python") for u in ua)
    assert not any(k.lower() == "authorization" for e in replayed for k, _ in e.request.headers)
