"""Replay: recorded bytes served again with the upstream gone, in recorded order, at the recorded pace."""

from __future__ import annotations

import json
import time
from pathlib import Path

import openai
import pytest

from bench.cassette import CassetteReader, find_cassettes, read_cassette
from bench.errors import BenchError
from proxy import start_proxy
from proxy.replay import parse_pace
from tests.proxy.conftest import CUT, MESSAGES, raw_chat, sdk, sdk_session
from tests.support.upstream import Upstream


async def test_replay_with_the_upstream_stopped_gives_the_same_bytes(upstream: Upstream, cassettes: Path) -> None:
    recorder = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    client = sdk(recorder.url + "/v1")
    recorded = await sdk_session(client)
    with pytest.raises(Exception, match=CUT):
        await raw_chat(client, model="test-drop", stream=True)
    await client.close()
    await recorder.close()
    await upstream.close()

    player = await start_proxy(upstream=None, cassettes=cassettes, mode="replay", pace="instant")
    client = sdk(player.url + "/v1")
    assert await sdk_session(client) == recorded
    # A stream the upstream broke off is broken off again.
    with pytest.raises(Exception, match=CUT):
        await raw_chat(client, model="test-drop", stream=True)
    await client.close()
    await player.close()
    assert player.stats.replayed == 7 and player.stats.misses == 0
    assert player.cassette_path is not None and recorder.cassette_path is not None
    records = read_cassette(player.cassette_path)[1]
    assert {r["mode"] for r in records} == {"replay"}
    assert {r["replay_of"]["cassette"] for r in records} == {recorder.cassette_path.name}
    stream = next(r for r in records if r["response"]["streamed"] and r["outcome"] == "complete")
    assert stream["timing"]["first_token"] is not None and stream["upstream"]["system_fingerprint"]


async def test_identical_requests_are_served_in_recorded_order(upstream: Upstream, cassettes: Path) -> None:
    recorder = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    client = sdk(recorder.url + "/v1")
    # `user` is not part of the fingerprint, but the upstream answers each differently.
    recorded = [await raw_chat(client, user=name) for name in ("ann", "bob", "cid")]
    assert len(set(recorded)) == 3
    await client.close()
    await recorder.close()
    player = await start_proxy(upstream=None, cassettes=cassettes, mode="replay", pace="instant")
    client = sdk(player.url + "/v1")
    replayed = [await raw_chat(client, user="zed") for _ in range(4)]
    await client.close()
    await player.close()
    assert replayed == [*recorded, recorded[0]]


async def test_a_miss_names_the_nearest_request_and_what_differs(upstream: Upstream, cassettes: Path) -> None:
    recorder = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    client = sdk(recorder.url + "/v1")
    await raw_chat(client, temperature=0.5)
    await raw_chat(client, model="other-model", messages=[{"role": "user", "content": "Something else entirely"}])
    await client.close()
    await recorder.close()
    player = await start_proxy(upstream=None, cassettes=cassettes, mode="replay", pace="instant")
    client = sdk(player.url + "/v1")
    with pytest.raises(openai.NotFoundError) as missed:
        await client.chat.completions.create(model="test-model", messages=MESSAGES, temperature=0.7)
    await client.close()
    await player.close()
    assert missed.value.code == "replay_miss"
    message = missed.value.message
    assert "nearest recorded: x1" in message and "body.temperature" in message and "messages" not in message
    body = missed.value.body
    assert isinstance(body, dict) and body["nearest"]["differs"] == ["body.temperature"]
    assert player.stats.misses == 1
    # The miss is in the replay cassette, as the failed exchange the client saw, and is never replayed itself.
    [replay_file] = [p for p in find_cassettes([cassettes]) if p.name.startswith("replay-")]
    [miss] = list(CassetteReader(replay_file))
    assert miss["response"]["status"] == 404 and miss["outcome"] == "upstream_error" and miss["mode"] == "replay"
    assert b"replay_miss" in miss["response"]["chunks"][0] and "nearest recorded: x1" in miss["error"]
    again = await start_proxy(upstream=None, cassettes=cassettes, mode="replay", pace="instant")
    assert again._state.index is not None and len(again._state.index) == 2
    await again.close()


async def test_auto_replays_hits_and_records_misses(upstream: Upstream, cassettes: Path) -> None:
    recorder = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    client = sdk(recorder.url + "/v1")
    first = await raw_chat(client, stream=True)
    await client.close()
    await recorder.close()
    before = len(upstream.requests)
    auto = await start_proxy(upstream=upstream.url, cassettes=cassettes, mode="auto", pace="instant")
    client = sdk(auto.url + "/v1")
    assert await raw_chat(client, stream=True) == first
    await raw_chat(client, temperature=1.5)
    await raw_chat(client, stream=True)  # the recording is used up: forwarded
    await client.close()
    await auto.close()
    assert len(upstream.requests) == before + 2
    assert auto.cassette_path is not None
    assert [r["mode"] for r in read_cassette(auto.cassette_path)[1]] == ["replay", "auto-record", "auto-record"]


async def test_pacing_realtime_takes_the_recorded_time_and_instant_does_not(
    upstream: Upstream, cassettes: Path
) -> None:
    recorder = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    client = sdk(recorder.url + "/v1")
    await raw_chat(client, stream=True, x_ttft_ms=50, x_delay_ms=50, x_words=8)
    await client.close()
    await recorder.close()
    assert recorder.cassette_path is not None
    recorded_s = read_cassette(recorder.cassette_path)[1][0]["timing"]["end"] / 1e6
    assert recorded_s >= 0.45

    elapsed = {}
    for pace in ("realtime", "instant", "x4"):
        player = await start_proxy(upstream=None, cassettes=cassettes, mode="replay", pace=pace)
        client = sdk(player.url + "/v1")
        start = time.perf_counter()
        await raw_chat(client, stream=True, x_ttft_ms=50, x_delay_ms=50, x_words=8)
        elapsed[pace] = time.perf_counter() - start
        await client.close()
        await player.close()
    # Generous bounds: the machine is shared.
    assert elapsed["realtime"] >= 0.8 * recorded_s
    assert elapsed["instant"] < 0.5 * recorded_s
    assert elapsed["x4"] >= 0.8 * recorded_s / 4 and elapsed["x4"] < elapsed["realtime"]


def test_pace_parsing() -> None:
    assert parse_pace("realtime") == 1.0 and parse_pace("instant") == 0.0 and parse_pace("x2") == 0.5
    for bad in ("x0", "fast", "x-1", "xinf"):
        with pytest.raises(BenchError, match="realtime, instant or xN"):
            parse_pace(bad)


async def test_replay_needs_recordings(cassettes: Path) -> None:
    with pytest.raises(BenchError, match="no recorded exchanges"):
        await start_proxy(upstream=None, cassettes=cassettes, mode="replay")
    with pytest.raises(BenchError, match="needs --upstream"):
        await start_proxy(upstream=None, cassettes=cassettes, mode="record")


async def test_replay_skips_replays_and_disconnects_when_indexing(upstream: Upstream, cassettes: Path) -> None:
    recorder = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    client = sdk(recorder.url + "/v1")
    body = await raw_chat(client)
    await client.close()
    await recorder.close()
    for _ in range(2):  # the replay sessions write cassettes too; they must not double the index
        player = await start_proxy(upstream=None, cassettes=cassettes, mode="replay", pace="instant")
        client = sdk(player.url + "/v1")
        assert await raw_chat(client) == body
        await client.close()
        await player.close()
    assert len(list(cassettes.glob("*.cassette"))) == 3
    assert json.loads(body)["object"] == "chat.completion"


async def test_a_stream_is_never_served_to_a_client_that_asked_for_json(upstream: Upstream, cassettes: Path) -> None:
    recorder = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    client = sdk(recorder.url + "/v1")
    streamed = await raw_chat(client, stream=True)
    await client.close()
    await recorder.close()
    player = await start_proxy(upstream=None, cassettes=cassettes, mode="replay", pace="instant")
    client = sdk(player.url + "/v1")
    assert await raw_chat(client, stream=True) == streamed
    with pytest.raises(openai.NotFoundError) as missed:
        await client.chat.completions.create(model="test-model", messages=MESSAGES)
    await client.close()
    await player.close()
    assert isinstance(missed.value.body, dict) and missed.value.body["nearest"]["differs"] == ["stream"]


def test_a_stream_left_after_done_replays_and_one_left_before_does_not() -> None:
    from proxy.replay import replayable

    def record(chunks: list[bytes]) -> dict[str, object]:
        return {
            "outcome": "client_disconnected",
            "request": {"fp": "abc"},
            "response": {"status": 200, "streamed": True, "chunks": chunks},
        }

    done = [b'data: {"choices":[]}\n\n', b"data: [DONE]\n\n"]
    assert replayable(record(done))
    assert not replayable(record(done[:1]))
