"""Forwarding through a real proxy to a real upstream, with the real openai SDK as the client."""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
from pathlib import Path

import aiohttp
import openai
import pytest
from aiohttp import web

from bench.core.cassette import read_cassette
from bench.core.serving import listen
from bench.proxy import start_proxy
from tests.proxy.conftest import CUT, MESSAGES, SECRET, TOOLS, raw_chat, sdk, sdk_session
from tests.support.upstream import SYSTEM_FINGERPRINT, Upstream


async def test_sdk_gets_the_same_bytes_as_direct_and_everything_is_recorded(
    upstream: Upstream, cassettes: Path
) -> None:
    direct = sdk(upstream.base_url)
    expected = await sdk_session(direct)
    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    client = sdk(proxy.url + "/v1")
    got = await sdk_session(client)
    assert got == expected
    # The parsed view works too: tool calls assembled from fragments, usage at the end of a stream.
    stream = await client.chat.completions.create(
        model="test-model", messages=MESSAGES, tools=TOOLS, stream=True, stream_options={"include_usage": True}
    )
    arguments = ""
    usage = None
    async for chunk in stream:
        for choice in chunk.choices:
            for call in choice.delta.tool_calls or []:
                arguments += call.function.arguments or "" if call.function else ""
        usage = chunk.usage or usage
    assert json.loads(arguments)["city"] == "Paris" and usage is not None
    await client.close()
    await direct.close()
    await proxy.close()

    assert proxy.cassette_path is not None
    header, records = read_cassette(proxy.cassette_path)
    assert header.settings.upstream == upstream.url and header.settings.mode == "record"
    assert len(records) == 7 == proxy.stats.exchanges
    by_path = {}
    for r in records:
        by_path.setdefault(r.request.path, []).append(r)
    streamed = by_path["/v1/chat/completions"][1]
    assert streamed.response.streamed and b"".join(streamed.response.chunks) == expected["chat_stream"]
    # How many reads the stream arrived in depends on scheduling (a busy machine merges them): one time per read is
    # checked here, one read per upstream write in test_each_upstream_read_is_kept_with_its_own_time.
    assert len(streamed.response.chunks) == len(streamed.response.chunk_us) >= 1
    t = streamed.timing
    assert 0 <= t.sent_upstream <= t.headers <= t.first_byte <= t.first_token <= t.end
    assert 0 < t.proxy_us < t.end
    # The proxy's longest loop stall while the exchange was in flight (tests/proxy/test_lag.py: what it sees).
    assert all(isinstance(r.timing.loop_lag_us, int) and r.timing.loop_lag_us >= 0 for r in records)
    assert streamed.outcome == "complete" and streamed.error is None
    assert streamed.upstream.system_fingerprint == SYSTEM_FINGERPRINT
    assert streamed.upstream.model == "test-model"
    assert streamed.upstream.server.startswith("bench-test-upstream")
    assert streamed.upstream.headers["x-request-id"].startswith("req_")
    assert streamed.request.fp.startswith("fp1:")
    assert json.loads(streamed.request.body)["stream"] is True
    plain = by_path["/v1/chat/completions"][0]
    assert plain.timing.first_token is None and not plain.response.streamed
    assert plain.upstream.system_fingerprint == SYSTEM_FINGERPRINT
    assert by_path["/v1/models"][0].request.method == "GET"
    assert by_path["/v1/embeddings"][0].upstream.model == "test-embed"
    assert [r.id for r in records] == [f"x{i}" for i in range(1, 8)]


async def test_each_upstream_read_is_kept_with_its_own_time(cassettes: Path) -> None:
    """An upstream that sends its next event only once the client has the previous one (lockstep, so no read can
    hold two events whatever the load): the record keeps one chunk per event, byte for byte, each with its time."""
    events = [f"data: {json.dumps({'n': i})}\n\n".encode() for i in range(6)] + [b"data: [DONE]\n\n"]
    received = [asyncio.Event() for _ in events]

    async def lockstep(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for event, got in zip(events, received, strict=True):
            await response.write(event)
            await asyncio.wait_for(got.wait(), 30)
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", lockstep)
    runner, _site, url = await listen(app, "127.0.0.1", 0)
    proxy = await start_proxy(upstream=url, cassettes=cassettes)
    try:
        async with aiohttp.ClientSession() as session:
            resp = await session.post(proxy.url + "/v1/chat/completions", json={"model": "m", "stream": True})
            buffer = b""
            for event, got in zip(events, received, strict=True):
                while not buffer.startswith(event):
                    buffer += await asyncio.wait_for(resp.content.readany(), 30)
                buffer = buffer[len(event) :]
                got.set()
            await resp.read()
    finally:
        await proxy.close()
        await runner.cleanup()
    assert proxy.cassette_path is not None
    [record] = read_cassette(proxy.cassette_path)[1]
    assert record.response.chunks == events
    assert len(record.response.chunk_us) == len(events) and all(d >= 0 for d in record.response.chunk_us)


async def test_first_token_is_the_first_content_or_tool_delta_not_the_role_frame(
    upstream: Upstream, cassettes: Path
) -> None:
    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    client = sdk(proxy.url + "/v1")
    await raw_chat(client, stream=True, x_ttft_ms=1, x_delay_ms=30, x_words=2)
    await raw_chat(client, stream=True, tools=TOOLS, x_ttft_ms=1, x_delay_ms=30)
    await client.close()
    await proxy.close()
    assert proxy.cassette_path is not None
    for record in read_cassette(proxy.cassette_path)[1]:
        chunks = record.response.chunks
        arrival = list(itertools.accumulate(record.response.chunk_us))
        first = next(i for i, c in enumerate(chunks) if b'"delta":{"content":"' in c or b'"tool_calls"' in c)
        assert b'"role":"assistant"' in chunks[0]
        assert record.timing.first_token == arrival[first]


async def test_headers_forwarded_minus_hop_by_hop_and_bench_tags(upstream: Upstream, cassettes: Path) -> None:
    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    headers = {
        "Authorization": f"Bearer {SECRET}",
        "X-Custom": "kept",
        "X-Bench-Run": "run-7",
        "X-Bench-Test": "t.case",
        "X-Bench-Epoch": "2",
        "Keep-Alive": "timeout=5",
        "Connection": "keep-alive, X-Drop-Me",
        "X-Drop-Me": "1",
    }
    async with (
        aiohttp.ClientSession() as session,
        session.post(proxy.url + "/v1/chat/completions?api-version=2024", json={"model": "m"}, headers=headers) as r,
    ):
        assert r.status == 200
        assert r.headers["x-request-id"].startswith("req_")
        await r.read()
    await proxy.close()
    seen = upstream.requests[-1]
    names = {k.lower() for k in seen.headers}
    assert seen.headers["Authorization"] == f"Bearer {SECRET}"
    assert seen.headers["X-Custom"] == "kept" and seen.query == "api-version=2024"
    assert not names & {"x-bench-run", "x-bench-test", "x-bench-epoch", "keep-alive", "x-drop-me"}
    assert proxy.cassette_path is not None
    record = read_cassette(proxy.cassette_path)[1][0]
    assert record.tags == {"run": "run-7", "test": "t.case", "epoch": "2"}
    assert record.request.query == "api-version=2024"
    assert ["X-Bench-Run", "run-7"] in record.request.headers


async def test_upstream_http_errors_pass_through_and_are_complete(upstream: Upstream, cassettes: Path) -> None:
    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    client = sdk(proxy.url + "/v1")
    with pytest.raises(openai.RateLimitError) as limited:
        await client.chat.completions.create(model="test-429", messages=MESSAGES)
    assert limited.value.response.headers["retry-after"] == "1"
    with pytest.raises(openai.InternalServerError):
        await client.chat.completions.create(model="test-500", messages=MESSAGES)
    await client.close()
    await proxy.close()
    assert proxy.cassette_path is not None
    records = read_cassette(proxy.cassette_path)[1]
    assert [(r.response.status, r.outcome) for r in records] == [(429, "complete"), (500, "complete")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_unreachable_upstream_gives_openai_shaped_502(cassettes: Path) -> None:
    dead = f"http://127.0.0.1:{_free_port()}"
    proxy = await start_proxy(upstream=dead, cassettes=cassettes)
    client = sdk(proxy.url + "/v1")
    with pytest.raises(openai.APIStatusError) as failed:
        await client.chat.completions.create(model="m", messages=MESSAGES)
    assert failed.value.status_code == 502
    assert dead in failed.value.message and failed.value.code == "bad_gateway"
    assert proxy.cassette_path is not None
    # In the file before the proxy closes: the client had its whole (error) answer, so kill -9 must not lose it.
    [record] = read_cassette(proxy.cassette_path)[1]
    await client.close()
    await proxy.close()
    assert record.outcome == "upstream_error" and record.response.status == 502
    assert dead in record.error and proxy.stats.errors == 1


async def test_silent_upstream_gives_504_and_silence_mid_stream_is_a_timeout(
    upstream: Upstream, cassettes: Path
) -> None:
    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes, idle_timeout=0.3)
    client = sdk(proxy.url + "/v1")
    with pytest.raises(openai.APIStatusError) as failed:
        await client.chat.completions.create(model="test-slow-headers", messages=MESSAGES, extra_body={"x_stall_s": 3})
    assert failed.value.status_code == 504
    with pytest.raises(Exception, match=CUT):
        await raw_chat(client, model="test-stall", stream=True, x_stall_s=3)
    await client.close()
    await proxy.close()
    assert proxy.cassette_path is not None
    records = read_cassette(proxy.cassette_path)[1]
    assert [r.outcome for r in records] == ["timeout", "timeout"]
    assert records[1].response.status == 200 and records[1].response.cut


async def test_upstream_drop_mid_stream_is_recorded_as_truncated(upstream: Upstream, cassettes: Path) -> None:
    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    client = sdk(proxy.url + "/v1")
    with pytest.raises(Exception, match=CUT):
        await raw_chat(client, model="test-drop", stream=True)
    body = await raw_chat(client, model="test-no-done", stream=True)
    assert b"[DONE]" not in body
    await client.close()
    await proxy.close()
    assert proxy.cassette_path is not None
    dropped, no_done = read_cassette(proxy.cassette_path)[1]
    assert dropped.outcome == "truncated" and dropped.response.cut and dropped.error
    assert no_done.outcome == "truncated" and not no_done.response.cut


async def test_client_disconnect_cancels_the_upstream_request(upstream: Upstream, cassettes: Path) -> None:
    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    body = {"model": "test-stall", "messages": MESSAGES, "stream": True, "x_stall_s": 20}
    async with aiohttp.ClientSession() as session:
        resp = await session.post(proxy.url + "/v1/chat/completions", json=body)
        await resp.content.readany()
        resp.close()
    for _ in range(600):  # up to 30 s on a busy machine; a few ms usually
        if upstream.requests[-1].disconnected and proxy.in_flight == 0:
            break
        await asyncio.sleep(0.05)
    assert upstream.requests[-1].disconnected
    await proxy.close()
    assert proxy.cassette_path is not None
    record = read_cassette(proxy.cassette_path)[1][0]
    assert record.outcome == "client_disconnected" and proxy.stats.client_disconnects == 1


@pytest.mark.parametrize(("declared", "outcome"), [("0.3", "timeout"), ("60", "client_disconnected")])
async def test_a_client_leaving_at_its_declared_idle_limit_is_recorded_as_a_timeout(
    upstream: Upstream, cassettes: Path, declared: str, outcome: str
) -> None:
    """A client that sends X-Bench-Idle-Timeout and leaves once the stream has been silent that long gave up for a
    timeout; one that leaves sooner than its declared limit just went away."""
    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    body = {"model": "test-stall", "messages": MESSAGES, "stream": True, "x_stall_s": 20}
    headers = {"X-Bench-Idle-Timeout": declared}
    async with aiohttp.ClientSession() as session:
        resp = await session.post(proxy.url + "/v1/chat/completions", json=body, headers=headers)
        await resp.content.readany()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(resp.content.readany(), 0.4)  # the client's own idle watch, as the driver's
        resp.close()
    for _ in range(600):  # up to 30 s on a busy machine; a few ms usually
        if proxy.in_flight == 0:
            break
        await asyncio.sleep(0.05)
    await proxy.close()
    assert proxy.cassette_path is not None
    (record,) = read_cassette(proxy.cassette_path)[1]
    assert record.outcome == outcome and record.tags["idle-timeout"] == declared
    assert "x-bench-idle-timeout" not in {k.lower() for k in upstream.requests[-1].headers}  # never sent upstream


async def test_upstream_key_replaces_the_client_token(
    upstream: Upstream, cassettes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = await start_proxy(
        upstream=upstream.url, cassettes=cassettes, upstream_key="sk-upstream-key-999999", client_token="proxy-token-1"
    )
    anonymous = sdk(proxy.url + "/v1", api_key="wrong-token")
    with pytest.raises(openai.AuthenticationError):
        await anonymous.models.list()
    client = sdk(proxy.url + "/v1", api_key="proxy-token-1")
    await raw_chat(client, x_echo_auth=True)
    await anonymous.close()
    await client.close()
    await proxy.close()
    assert upstream.requests[-1].headers["Authorization"] == "Bearer sk-upstream-key-999999"
    assert len(upstream.requests) == 1 and proxy.stats.rejected == 1
    assert proxy.cassette_path is not None
    raw = repr(read_cassette(proxy.cassette_path))
    assert "sk-upstream-key-999999" not in raw and "proxy-token-1" not in raw


async def test_passthrough_records_nothing(upstream: Upstream, cassettes: Path) -> None:
    proxy = await start_proxy(upstream=upstream.url, cassettes=cassettes, mode="passthrough")
    client = sdk(proxy.url + "/v1")
    assert await raw_chat(client, stream=True)
    await client.close()
    await proxy.close()
    assert proxy.cassette_path is None and not cassettes.exists()


async def test_upstream_base_path_is_not_doubled(upstream: Upstream, cassettes: Path) -> None:
    proxy = await start_proxy(upstream=upstream.url + "/v1", cassettes=cassettes, mode="passthrough")
    client = sdk(proxy.url + "/v1")
    assert await raw_chat(client)
    await client.close()
    await proxy.close()
    assert upstream.requests[-1].path == "/v1/chat/completions"
