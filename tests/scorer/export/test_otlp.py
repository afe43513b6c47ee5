"""`bench export --format otlp`: an OpenAI Agents SDK session recorded through the proxy (against the simulator)
becomes one trace of GenAI spans at the recorded times, and the GenAI histograms; written as OTLP JSON Lines, and sent
over OTLP/HTTP (protobuf and JSON) to a receiver that decodes what it gets with the OpenTelemetry protobuf
definitions. Known answers are read from the cassette's raw records, not from bench's parse."""

from __future__ import annotations

import asyncio
import json
from itertools import accumulate
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from bench.catalog.sim import start_sim
from bench.cli import main
from bench.core.cassette import CassetteReader, CassetteWriter, find_cassettes
from bench.core.cassette.records import Exchange
from bench.proxy.server import start_proxy
from bench.scorer.synth import exchange_record, sse_chunks
from tests.e2e.test_agents_sdk import run_agent


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("agent")

    async def record() -> None:
        async with await start_sim() as sim, await start_proxy(upstream=sim.url, cassettes=out) as proxy:
            await run_agent(proxy.url + "/v1", streamed=True)

    asyncio.run(record())
    assert main(["rescore", str(out), "--jobs", "1", "--no-parse-cache"]) == 0
    return out


def _records(folder: Path) -> list[Exchange]:
    return sorted((r for p in find_cassettes([folder]) for r in CassetteReader(p)), key=lambda r: r.started)


def _events(record: Exchange) -> list[tuple[int, dict[str, Any]]]:
    """(arrival offset, JSON event) of a recorded Responses API stream, read from its raw reads."""
    out = []
    for at, chunk in zip(accumulate(record.response.chunk_us), record.response.chunks, strict=True):
        for block in chunk.decode().split("\n\n"):
            for line in block.splitlines():
                if line.startswith("data: "):
                    out.append((at, json.loads(line[6:])))
    return out


def _spans(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for line in lines for rs in line.get("resourceSpans", ()) for ss in rs["scopeSpans"] for s in ss["spans"]]


def _attrs(span: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}


def test_an_agent_session_is_one_trace_at_the_recorded_times(agent: Path, tmp_path: Path) -> None:
    out = tmp_path / "otlp.jsonl"
    argv = ["export", str(agent), "--format", "otlp", "--content", "--service-name", "agents-app"]
    assert main([*argv, "--out", str(out)]) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    resource = {a["key"]: a["value"] for a in lines[0]["resourceSpans"][0]["resource"]["attributes"]}
    assert resource["service.name"] == {"stringValue": "agents-app"}
    spans = _spans(lines)
    assert len(spans) == 4 and len({s["traceId"] for s in spans}) == 1
    (root,) = [s for s in spans if s["name"] == "invoke_agent"]
    chats = sorted((s for s in spans if s is not root), key=lambda s: int(s["startTimeUnixNano"]))
    assert "parentSpanId" not in root or not root["parentSpanId"]
    assert all(s["parentSpanId"] == root["spanId"] for s in chats)
    records = _records(agent)
    assert len(records) == 3
    for span, record in zip(chats, records, strict=True):
        attrs = _attrs(span)
        assert span["name"] == "chat oracle" and span["kind"] == 3  # CLIENT
        assert int(span["startTimeUnixNano"]) == record.started * 1000
        assert int(span["endTimeUnixNano"]) == (record.started + record.timing.end) * 1000
        events = _events(record)
        first_delta = next(at for at, ev in events if ev["type"].endswith(".delta"))
        usage = next(ev["response"]["usage"] for _, ev in events if ev["type"] == "response.completed")
        (first_token,) = [e for e in span["events"] if e["name"] == "bench.first_token"]
        assert int(first_token["timeUnixNano"]) == (record.started + first_delta) * 1000
        assert attrs["gen_ai.usage.input_tokens"] == str(usage["input_tokens"])
        assert attrs["gen_ai.usage.output_tokens"] == str(usage["output_tokens"])
        assert attrs["gen_ai.request.model"] == "oracle" and attrs["gen_ai.response.model"] == "oracle"
        assert attrs["gen_ai.conversation.id"] == _attrs(root)["gen_ai.conversation.id"]
        assert attrs["server.address"] == "127.0.0.1"
    assert int(root["startTimeUnixNano"]) == records[0].started * 1000
    assert int(root["endTimeUnixNano"]) == (records[-1].started + records[-1].timing.end) * 1000
    first = _attrs(chats[0])
    assert "Weather and time in Paris?" in first["gen_ai.input.messages"]
    assert json.loads(first["gen_ai.output.messages"])[0]["parts"][0]["name"] == "get_weather"
    # The histograms: one duration point per exchange in all, and the recorded window.
    metrics = {
        m["name"]: m
        for line in lines
        for rm in line.get("resourceMetrics", ())
        for sm in rm["scopeMetrics"]
        for m in sm["metrics"]
    }
    assert set(metrics) == {
        "gen_ai.client.token.usage",
        "gen_ai.client.operation.duration",
        "gen_ai.server.time_to_first_token",
        "gen_ai.server.time_per_output_token",
    }
    durations = metrics["gen_ai.client.operation.duration"]["histogram"]["dataPoints"]
    assert sum(int(p["count"]) for p in durations) == 3
    assert {int(p["startTimeUnixNano"]) for p in durations} == {records[0].started * 1000}
    tokens = metrics["gen_ai.client.token.usage"]["histogram"]["dataPoints"]
    total = sum(float(p["sum"]) for p in tokens)
    expected = 0
    for record in records:
        usage = next(ev["response"]["usage"] for _, ev in _events(record) if ev["type"] == "response.completed")
        expected += usage["input_tokens"] + usage["output_tokens"]
    assert total == expected
    # Ids are derived: a second export writes the same bytes.
    again = tmp_path / "again.jsonl"
    assert main([*argv, "--out", str(again)]) == 0
    assert again.read_bytes() == out.read_bytes()


class Receiver:
    """An OTLP/HTTP receiver on 127.0.0.1 that decodes each request as the protocol defines it."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.got: list[tuple[str, str, Any]] = []

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        kind = request.content_type
        if kind == "application/x-protobuf":
            message: Any = (
                ExportTraceServiceRequest() if request.path == "/v1/traces" else ExportMetricsServiceRequest()
            )
            message.ParseFromString(body)
        else:
            message = json.loads(body)
        self.got.append((request.path, kind, message))
        if self.status != 200:
            return web.Response(status=self.status, text="refused")
        return web.Response(body=b"" if kind == "application/x-protobuf" else b"{}", content_type=kind)


async def _serve(receiver: Receiver, argv: list[str]) -> tuple[int, str]:
    app = web.Application()
    app.router.add_post("/v1/traces", receiver.handle)
    app.router.add_post("/v1/metrics", receiver.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        url = f"http://127.0.0.1:{port}"
        code = await asyncio.to_thread(main, [*argv, "--endpoint", url])
    finally:
        await runner.cleanup()
    return code, url


@pytest.mark.parametrize("protocol", ["http/protobuf", "http/json"])
async def test_otlp_http_sends_every_span_and_the_metrics(agent: Path, protocol: str) -> None:
    receiver = Receiver()
    code, _ = await _serve(receiver, ["export", str(agent), "--format", "otlp", "--protocol", protocol])
    assert code == 0
    paths = [p for p, _, _ in receiver.got]
    assert paths == ["/v1/traces", "/v1/metrics"]
    kinds = {k for _, k, _ in receiver.got}
    assert kinds == {"application/x-protobuf" if protocol == "http/protobuf" else "application/json"}
    traces = receiver.got[0][2]
    if protocol == "http/protobuf":
        spans = [s for rs in traces.resource_spans for ss in rs.scope_spans for s in ss.spans]
        names = sorted(s.name for s in spans)
        assert len({s.trace_id for s in spans}) == 1
    else:
        spans = _spans([traces])
        names = sorted(s["name"] for s in spans)
        assert len({s["traceId"] for s in spans}) == 1 and all(len(s["traceId"]) == 32 for s in spans)
    assert names == ["chat oracle"] * 3 + ["invoke_agent"]


async def test_signals_choose_what_is_sent(agent: Path, capsys: pytest.CaptureFixture[str]) -> None:
    receiver = Receiver()
    code, _ = await _serve(receiver, ["export", str(agent), "--format", "otlp", "--signals", "metrics"])
    assert code == 0 and [p for p, _, _ in receiver.got] == ["/v1/metrics"]
    code, _ = await _serve(Receiver(), ["export", str(agent), "--format", "otlp", "--signals", "logs"])
    assert code == 1 and "--signals logs: give traces, metrics or traces,metrics" in capsys.readouterr().err


async def test_a_receiver_that_refuses_stops_the_export_in_one_line(
    agent: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, url = await _serve(Receiver(status=400), ["export", str(agent), "--format", "otlp"])
    assert code == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"bench: error: {url}: the receiver did not take 4 span(s) (after 0 taken)")
    argv = ["export", str(agent), "--format", "otlp", "--protocol", "http/json"]
    code, url = await _serve(Receiver(status=415), argv)
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 1 and last.endswith(
        "a receiver that takes protobuf only (Arize Phoenix) needs --protocol http/protobuf"
    )


def test_content_is_redacted_as_a_cassette_is(tmp_path: Path) -> None:
    secret = "sk-live-0123456789abcdef"
    with CassetteWriter(tmp_path / "c.cassette") as writer:
        request = {"model": "m", "stream": True, "api_key": secret, "messages": [{"role": "user", "content": "hi"}]}
        writer.put(exchange_record(sse_chunks("Hello.", model="m"), id="x0", request=request))
    out = tmp_path / "otlp.jsonl"
    assert main(["export", str(tmp_path), "--format", "otlp", "--out", str(out), "--content"]) == 0
    text = out.read_text()
    assert secret not in text
    (span,) = _spans([json.loads(x) for x in text.splitlines() if "resourceSpans" in x])
    assert json.loads(_attrs(span)["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "hi"}]}
    ]
    assert json.loads(_attrs(span)["gen_ai.output.messages"])[0]["parts"] == [{"type": "text", "content": "Hello."}]
