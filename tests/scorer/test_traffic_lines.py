"""Untagged traffic is parsed and reported: the openai SDK (chat, Responses API, embeddings) through `bench proxy` to
the simulator, then `bench rescore` and `bench report` in every format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI

from bench.catalog.sim import start_sim
from bench.cli import main
from bench.proxy.server import start_proxy
from bench.scorer.report import aggregate
from bench.scorer.report.load import load
from bench.scorer.report.traffic import traffic
from bench.scorer.results import TrafficLine
from bench.scorer.scores_io import read_scores

TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import asyncio

    out = tmp_path_factory.mktemp("traffic")

    async def go() -> None:
        async with (
            await start_sim(tokens_per_second=2000) as sim,
            await start_proxy(upstream=sim.url, cassettes=out) as proxy,
        ):
            client = AsyncOpenAI(base_url=proxy.url + "/v1", api_key="sk-any", max_retries=0)
            for i in range(5):
                stream = await client.chat.completions.create(
                    model="oracle",
                    messages=[{"role": "user", "content": f"Hello {i}"}],
                    stream=True,
                    stream_options={"include_usage": True},
                )
                async for _ in stream:
                    pass
            await client.responses.create(model="oracle", input="What is the weather in Paris?", tools=[TOOL])
            stream = await client.responses.create(model="oracle", input="Say hello.", stream=True)
            async for _ in stream:
                pass
            await client.embeddings.create(model="oracle", input="hello")
            with pytest.raises(Exception, match="429"):
                await client.chat.completions.create(model="oracle+429!", messages=[{"role": "user", "content": "x"}])

    asyncio.run(go())
    return out


def test_rescore_writes_a_traffic_line_per_exchange(recorded: Path) -> None:
    assert main(["rescore", str(recorded), "--jobs", "1"]) == 0
    lines: list[TrafficLine] = []
    meta, results = read_scores(recorded / "scores.jsonl", traffic=lines)
    assert results == []
    assert len(lines) == 9
    assert [x.endpoint for x in lines] == ["chat.completions"] * 5 + ["responses"] * 2 + ["embeddings"] + [
        "chat.completions"
    ]
    assert {x.client for x in lines} == {"AsyncOpenAI/Python"}
    chat = lines[0]
    assert chat.status == 200 and chat.output_tokens > 0 and chat.tokens_source == "usage"
    assert chat.ttft_us is not None and chat.input_tokens > 0 and chat.system_fingerprint == "fp_bench_sim_1"
    streamed_responses = lines[6]
    assert streamed_responses.ttft_us is not None and streamed_responses.failed is False
    assert lines[7].e2el_us is not None and lines[7].ttft_us is None
    assert lines[8].status == 429 and lines[8].failed is True
    assert any("reported as traffic" in w for w in meta.warnings)


@pytest.mark.parametrize("fmt", ["table", "markdown", "json", "html"])
def test_report_on_an_untagged_cassette_has_a_traffic_section(recorded: Path, fmt: str, tmp_path: Path) -> None:
    out = tmp_path / f"report.{fmt}"
    # The cassette itself: rescored, the way `bench report cassettes/` does without a scores file.
    cassette = next(recorded.glob("*.cassette"))
    assert main(["report", str(cassette), "--format", fmt, "--out", str(out)]) == 0
    text = out.read_text()
    if fmt == "json":
        rows = json.loads(text)["traffic"]["rows"]
        by_endpoint = {(r["endpoint"], r["model"]): r for r in rows}
        chat = by_endpoint[("chat.completions", "oracle")]
        assert chat["requests"] == 5 and chat["statuses"] == {"200": 5} and chat["error_rate"] == 0
        assert chat["timing"]["ttft_ms"]["count"] == 5 and chat["output_tokens"] > 0
        assert by_endpoint[("chat.completions", "oracle+429!")]["error_rate"] == 1
        assert by_endpoint[("responses", "oracle")]["requests"] == 2
        assert by_endpoint[("embeddings", "oracle")]["timing"]["e2el_ms"]["count"] == 1
        return
    assert "Traffic" in text and "Traffic timing" in text
    # A terminal table folds long cells across lines: only short words are sure to appear whole there.
    words = ["responses", "embeddings"]
    if fmt != "table":
        words += ["chat.completions", "AsyncOpenAI/Python", "fp_bench_sim_1"]
    for word in words:
        assert word in text, word
    if fmt == "html":
        assert 'id="chart-traffic-status"' in text and 'id="chart-traffic-e2el"' in text


def _entry(i: int, fp: str, **kw: Any) -> TrafficLine:
    base: dict[str, Any] = {
        "cassette": "c.cassette",
        "id": f"x{i}",
        "started": 1_700_000_000_000_000 + i * 1_000_000,
        "endpoint": "chat.completions",
        "model": "m",
        "served_model": "m-1",
        "client": "curl",
        "status": 200,
        "outcome": "complete",
        "failed": False,
        "input_tokens": 10,
        "cached_input_tokens": None,
        "output_tokens": 4,
        "tokens_source": "usage",
        "ttft_us": 1000 * (i + 1),
        "tpot_us": 100.0,
        "e2el_us": 2000 * (i + 1),
        "itl_us": [100, 200],
        "system_fingerprint": fp,
        "unknown_events": {},
    }
    base.update(kw)
    return TrafficLine(**base)


def test_input_tokens_are_counted_from_the_request_when_there_is_no_usage() -> None:
    from bench.core.parse import parse_exchange
    from bench.scorer.traffic_lines import traffic_entry
    from tests.support.records import exchange

    body = b'{"model": "m", "messages": [{"role": "user", "content": "Hello, world again"}]}'
    record = exchange(
        id="x1",
        request={"method": "POST", "path": "/v1/chat/completions", "body": body, "headers": []},
        response={"status": 200, "streamed": False, "chunks": [b'{"choices": []}'], "chunk_us": [10]},
    )
    entry = traffic_entry(record, parse_exchange(record), "c.cassette", "m")
    assert (entry.input_tokens, entry.input_tokens_source) == (4, "counted")  # Hello , world again
    record.response.chunks = [b'{"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 0}}']
    entry = traffic_entry(record, parse_exchange(record), "c.cassette", "m")
    assert (entry.input_tokens, entry.input_tokens_source) == (9, "usage")


def test_fingerprint_changes_tokens_and_error_rate() -> None:
    entries = [
        _entry(0, "fp_a"),
        _entry(1, "fp_a", input_tokens=None, input_tokens_source=None, tokens_source="counted", output_tokens=3),
        _entry(2, "fp_b", status=500, failed=True, output_tokens=None, ttft_us=None, itl_us=[]),
        _entry(3, "fp_a", unknown_events={"response.audio.delta": 2}),
    ]
    t = traffic(entries)
    (row,) = t.rows
    assert row.requests == 4 and row.statuses == {"200": 3, "500": 1} and row.error_rate == 0.25
    assert (row.input_tokens, row.input_reported, row.output_tokens, row.output_counted) == (30, 3, 11, 1)
    assert row.fingerprints == ["fp_a", "fp_b"] and row.unknown_events == {"response.audio.delta": 2}
    assert [(c.before, c.after, c.exchange) for c in t.fingerprint_changes] == [
        ("fp_a", "fp_b", "c.cassette#x2"),
        ("fp_b", "fp_a", "c.cassette#x3"),
    ]
    assert t.fingerprint_changes[0].at == "2023-11-14T22:13:22Z"
    assert row.timing.itl_ms.count == 6 and row.timing.ttft_ms.count == 3


def test_a_report_of_traffic_only_is_never_empty(recorded: Path) -> None:
    report = aggregate.build(load(recorded / "scores.jsonl" if (recorded / "scores.jsonl").exists() else recorded))
    assert report.traffic.exchanges == 9 and report.traffic.untagged == 9
