"""The simulator's knobs for load tests: a limit on requests answered at once, and forced output lengths
(`min_tokens`, or vLLM's `ignore_eos` with `max_tokens`) read back with the project's own parser."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from bench.catalog.sim import start_sim
from bench.core.parse import parse_stream


async def _stream(url: str, body: dict[str, Any]) -> Any:
    async with aiohttp.ClientSession() as s, s.post(url + "/v1/chat/completions", json=body) as r:
        return parse_stream([await r.read()], [0])


async def test_forced_lengths_make_answers_exactly_that_long() -> None:
    ask = {"model": "oracle", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    usage = {"stream_options": {"include_usage": True}}
    async with await start_sim(catalog=None) as sim:
        natural = await _stream(sim.url, {**ask, **usage})
        forced = await _stream(sim.url, {**ask, **usage, "min_tokens": 40})
        eos = await _stream(sim.url, {**ask, **usage, "ignore_eos": True, "max_tokens": 33})
        capped = await _stream(sim.url, {**ask, **usage, "max_tokens": 3})
    assert natural.usage["completion_tokens"] == 12  # the generic answer's words
    assert forced.usage["completion_tokens"] == 40 and len(forced.content.split()) == 40
    assert eos.usage["completion_tokens"] == 33 and forced.content.startswith(natural.content)
    assert capped.usage["completion_tokens"] == 3  # without ignore_eos, max_tokens only cuts


async def test_max_concurrency_holds_requests_beyond_it_in_line() -> None:
    body = {"model": "oracle", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    # Six sent at once, each answered after 300 ms: the ones past the first two are in flight, waiting, meanwhile.
    async with await start_sim(catalog=None, ttft_ms=300, max_concurrency=2) as sim:
        answers = await asyncio.gather(*(_stream(sim.url, body) for _ in range(6)))
        stats = sim.stats
    assert all(a.content for a in answers)
    assert stats.max_answering <= 2 < stats.max_in_flight_total and stats.answering == 0
