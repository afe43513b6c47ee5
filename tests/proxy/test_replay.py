"""Replay: recorded bytes served again with the upstream gone, in recorded order, at the recorded pace."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from pathlib import Path

import aiohttp
import openai
import pytest

import bench.proxy.playback
from bench.core.cassette import CassetteReader, find_cassettes, read_cassette, records
from bench.core.errors import BenchError
from bench.proxy import start_proxy
from bench.proxy.persist import Persister
from bench.proxy.recorder import Exchange
from bench.proxy.recordings import Recorded, ReplayIndex, describe_miss, match_key, parse_pace, replayable, streams
from tests.proxy.conftest import CUT, MESSAGES, raw_chat, sdk, sdk_session
from tests.support.damage import beyond_repair
from tests.support.records import exchange
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
    assert {r.mode for r in records} == {"replay"}
    assert {r.replay_of.cassette for r in records} == {recorder.cassette_path.name}
    stream = next(r for r in records if r.response.streamed and r.outcome == "complete")
    assert stream.timing.first_token is not None and stream.upstream.system_fingerprint


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
    assert miss.response.status == 404 and miss.outcome == "upstream_error" and miss.mode == "replay"
    assert b"replay_miss" in miss.response.chunks[0] and "nearest recorded: x1" in miss.error
    again = await start_proxy(upstream=None, cassettes=cassettes, mode="replay", pace="instant")
    assert again.index is not None and len(again.index) == 2
    await again.close()


async def test_auto_replays_hits_and_records_misses(
    upstream: Upstream, cassettes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    client = sdk(recorder.url + "/v1")
    first = await raw_chat(client, stream=True)
    await client.close()
    await recorder.close()
    before = len(upstream.requests)
    # Records the proxy queues are written a little later; a long delay makes any record written that way land
    # after the next forwarded one (this test failed about half the time when the replay's record was queued).
    queue = Persister.later

    def later(self: Persister, ex: Exchange, end: int) -> None:
        asyncio.get_running_loop().call_later(0.5, queue, self, ex, end)

    monkeypatch.setattr(Persister, "later", later)
    auto = await start_proxy(upstream=upstream.url, cassettes=cassettes, mode="auto", pace="instant")
    client = sdk(auto.url + "/v1")
    assert await raw_chat(client, stream=True) == first
    assert auto.cassette_path is not None
    # The client has the replayed answer, so its record is in the file already.
    assert [r.mode for r in read_cassette(auto.cassette_path)[1]] == ["replay"]
    await raw_chat(client, temperature=1.5)
    await raw_chat(client, stream=True)  # the recording is used up: forwarded
    await client.close()
    await auto.close()
    assert len(upstream.requests) == before + 2
    assert auto.cassette_path is not None
    assert [r.mode for r in read_cassette(auto.cassette_path)[1]] == ["replay", "auto-record", "auto-record"]


async def test_pacing_realtime_takes_the_recorded_time_and_instant_does_not(
    upstream: Upstream, cassettes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    client = sdk(recorder.url + "/v1")
    await raw_chat(client, stream=True, x_ttft_ms=50, x_delay_ms=50, x_words=8)
    await client.close()
    await recorder.close()
    assert recorder.cassette_path is not None
    [recorded] = read_cassette(recorder.cassette_path)[1]
    recorded_s = recorded.timing.end / 1e6
    assert recorded_s >= 0.45
    # The schedule each replay asks for, read where it sleeps (the wall clock of a busy machine only adds delay).
    offsets_us = [recorded.timing.headers, *itertools.accumulate(recorded.response.chunk_us)]
    deadlines: list[int] = []
    sleep_until = bench.proxy.playback._sleep_until

    async def noted(deadline_ns: int) -> None:
        deadlines.append(deadline_ns)
        await sleep_until(deadline_ns)

    monkeypatch.setattr(bench.proxy.playback, "_sleep_until", noted)

    elapsed = {}
    for pace, factor in (("realtime", 1.0), ("instant", 0.0), ("x4", 0.25)):
        deadlines.clear()
        player = await start_proxy(upstream=None, cassettes=cassettes, mode="replay", pace=pace)
        client = sdk(player.url + "/v1")
        start = time.perf_counter()
        await raw_chat(client, stream=True, x_ttft_ms=50, x_delay_ms=50, x_words=8)
        elapsed[pace] = time.perf_counter() - start
        await client.close()
        await player.close()
        if factor == 0:
            assert deadlines == []  # instant: never waits
            continue
        # Every read is due at its recorded offset scaled by the pace (to the nanosecond's rounding).
        asked = [d - deadlines[0] for d in deadlines]
        want = [int(o * 1000 * factor) - int(offsets_us[0] * 1000 * factor) for o in offsets_us]
        assert len(asked) == len(want) and all(abs(a - w) <= 1 for a, w in zip(asked, want, strict=True))
    assert elapsed["realtime"] >= 0.8 * recorded_s
    assert elapsed["x4"] >= 0.8 * recorded_s / 4


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
    # A stream its client cut short: recorded (as client_disconnected) but never replayable.
    cut = {"model": "test-stall", "messages": MESSAGES, "stream": True, "x_stall_s": 20}
    async with aiohttp.ClientSession() as session:
        resp = await session.post(recorder.url + "/v1/chat/completions", json=cut)
        await resp.content.readany()
        resp.close()
    for _ in range(600):
        if recorder.in_flight == 0:
            break
        await asyncio.sleep(0.05)
    await recorder.close()
    assert recorder.cassette_path is not None
    assert [r.outcome for r in read_cassette(recorder.cassette_path)[1]] == ["complete", "client_disconnected"]
    for _ in range(2):  # the replay sessions write cassettes too; they must not double the index
        player = await start_proxy(upstream=None, cassettes=cassettes, mode="replay", pace="instant")
        assert player.index is not None and len(player.index) == 1
        client = sdk(player.url + "/v1")
        assert await raw_chat(client) == body
        with pytest.raises(openai.NotFoundError):
            await raw_chat(client, **{k: v for k, v in cut.items() if k != "x_stall_s"}, x_stall_s=20)
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
    from bench.proxy.recordings import replayable

    def record(chunks: list[bytes]) -> records.Exchange:
        return exchange(
            outcome="client_disconnected",
            request={"fp": "abc"},
            response={"status": 200, "streamed": True, "chunks": chunks},
        )

    done = [b'data: {"choices":[]}\n\n', b"data: [DONE]\n\n"]
    assert replayable(record(done))
    assert not replayable(record(done[:1]))


async def test_a_bad_or_damaged_file_among_good_ones_is_skipped_with_a_warning(
    upstream: Upstream, cassettes: Path, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = await start_proxy(upstream=upstream.url, cassettes=cassettes)
    client = sdk(recorder.url + "/v1")
    recorded = [await raw_chat(client, user=name) for name in ("ann", "bob")]
    await client.close()
    await recorder.close()
    assert recorder.cassette_path is not None
    (cassettes / "empty.cassette").write_bytes(b"")
    (cassettes / "foreign.cassette").write_bytes(b"not a cassette")
    damaged = cassettes / "damaged.cassette"
    data = bytearray(recorder.cassette_path.read_bytes())
    beyond_repair(data, len(data) // 2)
    damaged.write_bytes(bytes(data))
    player = await start_proxy(upstream=None, cassettes=cassettes, mode="replay", pace="instant")
    client = sdk(player.url + "/v1")
    assert await raw_chat(client, user="zed") == recorded[0]
    await client.close()
    await player.close()
    warnings = [r.getMessage() for r in caplog.records if "warning" in r.getMessage()]
    assert any("empty.cassette" in w and "0-byte" in w for w in warnings)
    assert any("foreign.cassette" in w and "not a bench cassette" in w for w in warnings)
    assert any("damaged.cassette" in w and "replaying what was read" in w for w in warnings)
    assert all("\n" not in w for w in warnings)
    # One line each, in the proxy's words: what was wrong, and what replay does about it.
    assert all(w.startswith("bench proxy: warning: ") for w in warnings)
    assert [w.endswith("; not replayed") for w in warnings].count(True) == 2
    assert [w.endswith("; replaying what was read") for w in warnings].count(True) == 1


def test_pace_below_one_slows_down_and_odd_spellings() -> None:
    assert parse_pace("x0.5") == 2.0 and parse_pace("x0.25") == 4.0  # N < 1: slower than recorded
    assert parse_pace(" X4 ") == 0.25 and parse_pace("Realtime") == 1.0 and parse_pace("x1") == 1.0
    for bad in ("x", "xnan", "x-0.5", "0.5", ""):
        with pytest.raises(BenchError, match="realtime, instant or xN"):
            parse_pace(bad)


@pytest.mark.parametrize(
    ("body", "stream"),
    [
        (b'{"stream": true}', True),
        (b'{"stream": false}', False),
        (b'{"stream": null}', False),
        (b'{"stream": 0}', False),
        (b'{"model": "m"}', False),
        (b'{"messages": [{"content": "\\"stream\\": true"}]}', False),
        (b'["stream", true]', False),
        (b'{"stream": tru', False),
        (b"", False),
    ],
)
def test_only_a_true_stream_field_asks_for_a_stream(body: bytes, stream: bool) -> None:
    assert streams(body) is stream
    assert match_key("fp1:x", body) == ("fp1:x/stream" if stream else "fp1:x")


def recorded(i: int, method: str, path: str, body: dict[str, object], query: str = "") -> Recorded:
    raw = json.dumps(body).encode()
    request = {"method": method, "path": path, "query": query, "body": raw, "fp": f"fp1:{i}"}
    return Recorded("c.cassette", exchange(id=f"x{i}", started=i, request=request, response={"status": 200}))


def test_nearest_weighs_method_and_path_over_body_fields() -> None:
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0}
    index = ReplayIndex(
        [
            recorded(1, "POST", "/v1/completions", chat),  # same body, another path
            recorded(2, "GET", "/v1/chat/completions", chat),  # same body, another method
            recorded(3, "POST", "/v1/chat/completions", {"model": "x", "messages": [], "temperature": 1, "n": 2}),
        ]
    )
    found = index.nearest("POST", "/v1/chat/completions/", "", json.dumps(chat).encode())
    assert found is not None
    item, diffs = found
    assert item.id == "x3"
    assert diffs == ["body.messages (length 1 vs 0)", "body.model", "body.n", "body.temperature"]
    same_route = index.nearest("POST", "/v1/completions", "", json.dumps(chat).encode())
    assert same_route is not None and same_route[0].id == "x1" and same_route[1] == []
    assert ReplayIndex([]).nearest("POST", "/x", "", b"") is None


def test_replayable_records() -> None:
    ok = {"request": {"fp": "fp1:a"}, "response": {"status": 200}, "outcome": "complete"}
    assert replayable(exchange(ok))
    assert not replayable(exchange({**ok, "outcome": "client_disconnected"}))
    assert not replayable(exchange({**ok, "response": {"status": None}}))
    assert not replayable(exchange({**ok, "response": {}}))
    assert not replayable(exchange({**ok, "mode": "replay"}))
    assert not replayable(exchange({**ok, "replay_of": {"cassette": "c.cassette", "id": "x1"}}))
    assert not replayable(exchange({**ok, "request": {}}))
    assert replayable(exchange({**ok, "outcome": "truncated", "mode": "auto-record"}))  # a cut upstream replays cut


def test_the_miss_message_names_the_nearest_and_its_differences() -> None:
    item = recorded(7, "POST", "/v1/chat/completions", {"model": "m"})
    head = "bench replay: no recorded exchange matches POST /v1/chat/completions (fp1:q)"
    assert describe_miss("POST", "/v1/chat/completions", "fp1:q", None) == (
        f"{head}; the cassettes hold no exchanges: record first with --mode record or auto"
    )
    many = [f"body.f{i}" for i in range(10)]
    message = describe_miss("POST", "/v1/chat/completions", "fp1:q", (item, many))
    assert message == (
        f"{head}; nearest recorded: x7 in c.cassette (POST /v1/chat/completions), which differs in: "
        f"{', '.join(many[:8])} and 2 more; record it with --mode auto or fix the request"
    )
    used_up = describe_miss("POST", "/v1/chat/completions", "fp1:q", (item, []))
    assert "differs in: nothing visible (a used-up identical request)" in used_up
