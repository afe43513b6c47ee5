"""Untagged traffic (exchanges no test or rule scored) browses like any result: listed, opened, its raw bytes, its
tokens and, with a price table, its cost."""

from __future__ import annotations

from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from bench.cli import main
from bench.core.cassette import CassetteWriter
from bench.scorer.report.cost import load_prices
from bench.scorer.synth import exchange_record, sse_chunks
from bench.view.index import UNTAGGED, open_index
from bench.view.web_app import make_app


async def test_untagged_exchanges_are_listed_and_open(tmp_path: Path) -> None:
    with CassetteWriter(tmp_path / "agent.cassette") as writer:
        for i, text in enumerate(["Paris is the capital.", "Forty-two."]):
            request = {"model": "gw-model", "stream": True, "messages": [{"role": "user", "content": f"q{i}"}]}
            writer.put(exchange_record(sse_chunks(text, model="gw-model"), id=f"x{i}", request=request))
    assert main(["rescore", str(tmp_path)]) == 0
    index = open_index([tmp_path])
    assert [(r.run, r.suite, r.test, r.passed) for r in index.rows] == [
        (UNTAGGED, "chat.completions", "agent.cassette#x0", None),
        (UNTAGGED, "chat.completions", "agent.cassette#x1", None),
    ]
    (run,) = index.runs
    assert run.models[0].n == 0 and run.results == 2  # unscored: no pass rate
    async with TestClient(TestServer(make_app(index))) as client:
        key = {"run": UNTAGGED, "model": index.rows[1].model, "test": "agent.cassette#x1", "epoch": "0"}
        response = await client.get("/api/result", params=key)
        assert response.status == 200, await response.text()
        body = await response.json()
        (exchange,) = body["exchanges"]
        assert [t["role"] for t in exchange["messages"]] == ["user"]
        assert exchange["answer"]["text"] == "Forty-two."
        assert body["notes"][0].startswith("untagged traffic: no catalog test")
        assert exchange["timeline"]["token_events"] == len(sse_chunks("Forty-two.")) - 2  # not usage, not [DONE]
        raw = await client.get("/api/raw", params={**key, "id": "x1"})
        assert (await raw.text()).endswith("data: [DONE]\n\n")


async def test_an_agent_session_browses_as_one_result_with_its_exchanges_as_turns(tmp_path: Path) -> None:
    with CassetteWriter(tmp_path / "agent.cassette") as writer:
        for i, text in enumerate(["First answer.", "Second answer.", "Alone."]):
            request = {"model": "gw-model", "stream": True, "messages": [{"role": "user", "content": f"q{i}"}]}
            record = exchange_record(sse_chunks(text, model="gw-model"), id=f"x{i}", request=request)
            record.started = i  # the file's order
            if i < 2:  # the client names its session on its first two requests only
                record.request.headers.append(["X-Session-Id", "agent-run-1"])
            writer.put(record)
    assert main(["rescore", str(tmp_path)]) == 0
    index = open_index([tmp_path])
    assert [(r.run, r.test) for r in index.rows] == [
        (UNTAGGED, "session agent-run-1"),
        (UNTAGGED, "agent.cassette#x2"),
    ]
    async with TestClient(TestServer(make_app(index))) as client:
        key = {"run": UNTAGGED, "model": index.rows[0].model, "test": "session agent-run-1", "epoch": "0"}
        response = await client.get("/api/result", params=key)
        assert response.status == 200, await response.text()
        body = await response.json()
        assert [(e["id"], e["turn"]) for e in body["exchanges"]] == [("x0", 0), ("x1", 1)]
        assert [e["answer"]["text"] for e in body["exchanges"]] == ["First answer.", "Second answer."]
        assert "untagged traffic" in body["notes"][0] and "an agent session of 2 exchanges" in body["notes"][0]


async def test_each_model_call_has_its_tokens_and_with_prices_its_cost(tmp_path: Path) -> None:
    text = "Paris is the capital of France."  # 31 characters: 8 pieces of 4 (output); the stream's usage says 10 in
    with CassetteWriter(tmp_path / "priced.cassette") as writer:
        request = {"model": "gw-model", "stream": True, "messages": [{"role": "user", "content": "capital?"}]}
        writer.put(exchange_record(sse_chunks(text, model="gw-model"), id="x0", request=request))
    assert main(["rescore", str(tmp_path)]) == 0
    prices = tmp_path / "prices.yaml"
    prices.write_text("currency: EUR\nmodels:\n  'gw-*': {input: 3.0, cached_input: 1.0, output: 15.0}\n")
    index = open_index([tmp_path])
    index.prices = load_prices(prices)
    async with TestClient(TestServer(make_app(index))) as client:
        key = {"run": UNTAGGED, "model": "gw-model", "test": "priced.cassette#x0", "epoch": "0"}
        body = await (await client.get("/api/result", params=key)).json()
    (call,) = body["exchanges"]
    assert call["tokens"] == {"input": 10, "cached_input": None, "output": 8, "output_source": "usage"}
    assert call["cost"] == pytest.approx((10 * 3.0 + 8 * 15.0) / 1e6) and body["currency"] == "EUR"
