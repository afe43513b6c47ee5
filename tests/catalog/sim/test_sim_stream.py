"""Stream encoding, test recognition, faults and pacing of the simulator, read with the project's own parser."""

from __future__ import annotations

import time
from typing import Any

import aiohttp
import orjson
from hypothesis import given
from hypothesis import strategies as st

from bench.catalog.model import Catalog
from bench.catalog.sim import start_sim
from bench.catalog.sim.catalog_index import CatalogIndex
from bench.catalog.sim.stream import split_tokens
from bench.core.parse import parse_stream


@given(st.text())
def test_tokens_join_back(text: str) -> None:
    assert "".join(split_tokens(text)) == text


def test_index_finds_test_and_turn(mini: Catalog) -> None:
    index = CatalogIndex(mini)
    multi = mini.tests["t.multi"]
    convo = [
        *multi.messages,
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "tool", "content": "x"},
    ]
    test, turn = index.find(convo)
    assert test is multi and turn == 1
    assert index.find([{"role": "user", "content": "something else"}]) == (None, 0)


async def _post(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> tuple[int, bytes, Any]:
    async with aiohttp.ClientSession() as s, s.post(url + "/v1/chat/completions", json=body, headers=headers) as r:
        return r.status, await r.read(), r.headers


async def test_multi_turn_oracle_then_answer_with_usage_only_when_asked(mini: Catalog) -> None:
    multi = mini.tests["t.multi"]
    async with await start_sim(catalog=mini) as sim:
        body = {"model": "oracle", "messages": list(multi.messages), "stream": True}
        status, raw, _ = await _post(sim.url, body)
        first = parse_stream([raw], [0])
        assert status == 200 and [c.name for c in first.tool_calls] == ["get_weather"]
        assert first.usage is None and "no_done" not in first.findings
        convo = [
            *multi.messages,
            {"role": "assistant", "tool_calls": [{"id": "a", "type": "function", "function": {}}]},
            {"role": "tool", "tool_call_id": "a", "content": "sunny"},
        ]
        body = {**body, "messages": convo, "stream_options": {"include_usage": True}}
        _, raw, _ = await _post(sim.url, body)
        second = parse_stream([raw], [0])
        assert second.content == "It is sunny in Rome." and second.finish_reason == "stop"
        assert second.usage is not None and second.usage["completion_tokens"] == 5


async def test_faults_hit_first_attempts_then_pass(mini: Catalog) -> None:
    text = mini.tests["t.text"]
    async with await start_sim(catalog=mini) as sim:
        body = {"model": "oracle+500+truncate+empty", "messages": list(text.messages), "stream": True}
        status, _, headers = await _post(sim.url, body)
        assert status == 500 and headers["Retry-After"] == "1"
        _, raw, _ = await _post(sim.url, body)
        assert "truncated" in parse_stream([raw], [0]).findings
        _, raw, _ = await _post(sim.url, body)
        assert "empty_choices" in parse_stream([raw], [0]).findings
        _, raw, _ = await _post(sim.url, body)
        assert parse_stream([raw], [0]).content == text.reference.answer
        status, _, headers = await _post(sim.url, {**body, "model": "oracle"}, {"X-Sim-Fault": "429:2"})
        assert status == 429 and headers["Retry-After"] == "2"
        status, _, headers = await _post(sim.url, {**body, "model": "oracle"}, {"X-Sim-Fault": "503:0"})
        assert status == 503 and headers["Retry-After"] == "0"
        assert sim.stats.faults == {"500": 1, "truncate": 1, "empty": 1, "429": 1, "503": 1}


async def test_max_tokens_cuts_with_length(mini: Catalog) -> None:
    text = mini.tests["t.text"]
    async with await start_sim(catalog=mini) as sim:
        body = {"model": "oracle", "messages": list(text.messages), "max_tokens": 2}
        _, raw, _ = await _post(sim.url, body)
        doc = orjson.loads(raw)
        assert doc["choices"][0]["finish_reason"] == "length" and doc["usage"]["completion_tokens"] == 2
        assert doc["choices"][0]["message"]["content"] == "Paris is"


async def test_pacing_follows_ttft_and_tokens_per_second(mini: Catalog) -> None:
    text = mini.tests["t.text"]  # 5 tokens
    async with await start_sim(catalog=mini, ttft_ms=200, tokens_per_second=20) as sim:
        t0 = time.monotonic()
        _, raw, _ = await _post(sim.url, {"model": "oracle", "messages": list(text.messages), "stream": True})
        elapsed = time.monotonic() - t0
    # 0.2 s to the first token, then 5 tokens at 20/s: at least 0.45 s; generous upper bound for a shared machine.
    assert 0.4 <= elapsed < 5.0
    assert parse_stream([raw], [0]).content == text.reference.answer
