"""Replay match options: strict by default; named options let agent traffic with volatile values match again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI, NotFoundError

from bench.cassette import CassetteReader, find_cassettes
from bench.cassette.records import MatchSettings
from bench.errors import BenchError
from catalog.sim import start_sim
from proxy.matching import MatchOptions, match_options
from proxy.server import start_proxy

TOOLS: list[Any] = [
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
]


def conversation(stamp: str, call_id: str) -> list[Any]:
    return [
        {"role": "system", "content": f"Request {stamp}. Be brief."},
        {"role": "user", "content": "What time is it?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "get_time", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": call_id, "content": f"12:00 (at {stamp})"},
    ]


def test_options_normalise_as_documented() -> None:
    body = {
        "metadata": {"trace": "t1"},
        "input": [
            {"type": "function_call", "id": "fc_9", "call_id": "call_x", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_x", "output": "done at 2026-11-30T21:00:00Z"},
            {"role": "user", "content": [{"type": "input_text", "text": "id req-123 now"}]},
        ],
    }
    opts = MatchOptions(ignore=("metadata",), tool_call_ids=True, blank=(r"\d{4}-\d\d-\d\dT[\d:]+Z", r"req-\d+"))
    assert opts.normalise(body) == {
        "input": [
            {"type": "function_call", "id": "call_0", "call_id": "call_1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "done at "},
            {"role": "user", "content": [{"type": "input_text", "text": "id  now"}]},
        ]
    }
    assert MatchOptions(ignore=("input.*.id",)).normalise({"input": [{"id": 1, "x": 2}]}) == {"input": [{"x": 2}]}
    assert MatchOptions().strict and not opts.strict
    assert MatchOptions().key("POST", "/v1/x", "", b"{}", "fp1:abc") == "fp1:abc"


@pytest.mark.parametrize(("ignore", "blank"), [(["a..b"], []), ([], ["("])])
def test_bad_options_are_one_line_errors(ignore: list[str], blank: list[str]) -> None:
    with pytest.raises(BenchError) as info:
        match_options(ignore, False, blank)
    assert "\n" not in str(info.value)


async def test_agent_turns_with_volatile_values_match_only_with_options(tmp_path: Path) -> None:
    recorded = tmp_path / "rec"  # replay cassettes are written beside the recordings
    async with (
        await start_sim() as sim,
        await start_proxy(upstream=sim.url, cassettes=recorded) as proxy,
    ):
        client = AsyncOpenAI(base_url=proxy.url + "/v1", api_key="sk-any", max_retries=0)
        first = await client.chat.completions.create(
            model="oracle", messages=conversation("2026-11-30T20:00:01Z", "call_AAAA"), tools=TOOLS
        )
    later = conversation("2026-12-01T09:30:59Z", "call_BBBB")
    # Strict (the default): the second run's timestamp and tool-call id make it a miss.
    async with await start_proxy(upstream=None, cassettes=recorded, mode="replay", pace="instant") as strict:
        client = AsyncOpenAI(base_url=strict.url + "/v1", api_key="sk-any", max_retries=0)
        with pytest.raises(NotFoundError):
            await client.chat.completions.create(model="oracle", messages=later, tools=TOOLS)
        strict_cassette = strict.cassette_path
    opts = match_options([], True, [r"\d{4}-\d\d-\d\dT[\d:]+Z"])
    async with await start_proxy(
        upstream=None, cassettes=recorded, mode="replay", pace="instant", match=opts
    ) as relaxed:
        client = AsyncOpenAI(base_url=relaxed.url + "/v1", api_key="sk-any", max_retries=0)
        again = await client.chat.completions.create(model="oracle", messages=later, tools=TOOLS)
        relaxed_cassette = relaxed.cassette_path
    assert again.choices[0].message.content == first.choices[0].message.content
    assert again.id == first.id
    assert strict_cassette is not None and relaxed_cassette is not None
    headers = {
        p.name: CassetteReader(p).header.settings.match
        for p in find_cassettes([recorded])
        if p in (strict_cassette, relaxed_cassette)
    }
    assert headers[strict_cassette.name] == MatchSettings(strict=True, ignore=[], tool_call_ids=False, blank=[])
    relaxed_match = headers[relaxed_cassette.name]
    assert isinstance(relaxed_match, MatchSettings) and relaxed_match.tool_call_ids is True
    assert relaxed_match.blank == [r"\d{4}-\d\d-\d\dT[\d:]+Z"]
