"""Replay match options: strict by default; named options let agent traffic with volatile values match again."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI, NotFoundError

from bench.catalog.sim import start_sim
from bench.core.cassette import CassetteReader, find_cassettes
from bench.core.cassette.records import MatchSettings
from bench.core.errors import BenchError
from bench.proxy.matching import MatchOptions, match_options
from bench.proxy.server import start_proxy

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


def test_paths_drop_keys_wildcards_and_list_items() -> None:
    body: dict[str, Any] = {
        "metadata": {"trace": "t1", "user": "u"},
        "messages": [{"role": "system", "content": "a", "name": "s"}, {"role": "user", "content": "b", "name": "u"}],
        "input": [{"id": 1}, {"id": 2}],
    }

    def drop(*paths: str) -> Any:
        return MatchOptions(ignore=paths).normalise(body)

    assert drop("metadata") == {"messages": body["messages"], "input": body["input"]}
    assert drop("metadata.*")["metadata"] == {}  # `*` is any key of a map
    assert drop("*.trace")["metadata"] == {"user": "u"} and drop("*.trace")["messages"] == body["messages"]
    assert drop("input.*")["input"] == []  # `*` is any item of a list
    assert drop("messages.0")["messages"] == [body["messages"][1]]  # a number is one item
    assert drop("messages.1.name")["messages"] == [body["messages"][0], {"role": "user", "content": "b"}]
    assert drop("messages.7", "nothing.here", "metadata.trace.deeper") == body  # paths that reach nothing
    assert body["metadata"] == {"trace": "t1", "user": "u"}  # the request itself is not changed


def key(
    opts: MatchOptions, body: bytes, *, method: str = "POST", path: str = "/v1/chat/completions", query: str = ""
) -> str:
    return opts.key(method, path, query, body, "fp1:strict")


def test_a_relaxed_key_still_tells_requests_apart() -> None:
    opts = MatchOptions(ignore=("metadata",))
    body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "metadata": {"t": 1}}'
    base = key(opts, body)
    assert base != "fp1:strict"
    # The same request, however its JSON is written, and with another value in the ignored field: the same key.
    assert key(opts, b'{"metadata":{"t":2},"messages":[{"content":"hi","role":"user"}],"model":"m"}') == base
    assert key(opts, body, path="/v1/chat/completions/") == base  # a trailing slash is the same endpoint
    # Anything else that makes it another request: another key.
    others = {
        key(opts, body.replace(b'"m"', b'"m2"')),
        key(opts, body, path="/v1/responses"),
        key(opts, body, query="api-version=1"),
        key(opts, body, query="api-version=2"),
        key(opts, body, method="PUT"),
        # Only the trailing slash is dropped from a path: ids ending in any other character stay apart.
        key(opts, body, path="/v1/files/file-X"),
        key(opts, body, path="/v1/files/file-"),
    }
    assert len(others) == 7 and base not in others
    # A body that is not JSON has nothing to relax: its fingerprint is its key.
    assert key(opts, b"not json") == "fp1:strict"


def test_the_header_states_each_option() -> None:
    assert MatchOptions(ignore=("metadata",)).describe() == MatchSettings(
        strict=False, ignore=["metadata"], tool_call_ids=False, blank=[]
    )
    assert MatchOptions().describe() == MatchSettings(strict=True, ignore=[], tool_call_ids=False, blank=[])


def test_command_line_options_are_checked_and_kept() -> None:
    opts = match_options(["metadata", "messages.*.name"], True, [r"req-\d+"])
    assert opts == MatchOptions(("metadata", "messages.*.name"), True, (r"req-\d+",))
    assert match_options(None, False, None) == MatchOptions()
    for bad in ("", "a..b", ".a", "a."):
        with pytest.raises(BenchError, match=f"^--match-ignore {re.escape(repr(bad))}: give a dotted JSON path"):
            match_options([bad], False, [])
    with pytest.raises(BenchError, match=r"^--match-blank '\(': not a regular expression \(missing \)"):
        match_options([], False, ["("])
