"""Large answers written to the cassette in parts while they stream (bench.proxy.parts): read back whole, byte for byte,
by every reader; secrets scrubbed across part boundaries; damage and kill -9 mid-answer reported in one line."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import signal
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import msgspec
import pytest
import zstandard
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.cli import main
from bench.core.cassette import CassetteReader, columns, frames, read_cassette
from bench.core.cassette.envelope import Unframer
from bench.core.cassette.redact import BodyScrubber, scrub_reads, secret_forms
from bench.core.cassette.seek import SeekIndex
from bench.proxy import start_proxy
from tests.support.damage import beyond_repair
from tests.support.serve import serve_on_loopback

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-spill-secret-0123456789abcdef"
SPILL = 256 << 10


class _Kind(msgspec.Struct):
    kind: str = ""


def kinds(path: Path) -> list[str]:
    """The kind of every record after the header, in order (read below the reader, to see the parts themselves)."""
    unframer = Unframer()
    out: list[str] = []
    decoder = msgspec.msgpack.Decoder(_Kind)
    for event in frames.walk(frames.open_bytes(path)):
        if event.frame == 0:
            continue  # the header's frame: the header alone, not framed
        got = unframer.feed(event.data) if isinstance(event, frames.Data) else unframer.finish()
        out += [decoder.decode(columns.record_part(p)).kind for _, p in got]
    return out


def json_body(size: int) -> bytes:
    words = b"alpha beta gamma delta epsilon zeta eta theta iota kappa".split()
    text = b" ".join(words[(i * 7) % len(words)] + str(i).encode() for i in range(size // 9))[:size]
    head = b'{"id":"c1","object":"chat.completion","model":"big-model","choices":[{"message":{"content":"'
    return head + text + b'"},"finish_reason":"stop"}],"system_fingerprint":"fp_big"}'


def sse_events(n: int) -> list[bytes]:
    events = []
    for i in range(n):
        chunk = {"id": "s1", "model": "big-model", "choices": [{"index": 0, "delta": {"content": f"tok{i} " * 8}}]}
        events.append(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    last = {"id": "s1", "model": "big-model", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    return [*events, b"data: " + json.dumps(last).encode() + b"\n\n", b"data: [DONE]\n\n"]


async def serve(app: web.Application) -> AsyncIterator[str]:
    runner, url = await serve_on_loopback(app)
    try:
        yield url
    finally:
        await runner.cleanup()


def big_app(body: bytes, events: list[bytes], echo_every: int = 0) -> web.Application:
    async def chat(request: web.Request) -> web.StreamResponse:
        payload = await request.json()
        if not payload.get("stream"):
            return web.Response(body=body, content_type="application/json")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        auth = request.headers.get("Authorization", "").removeprefix("Bearer ").encode()
        for i, event in enumerate(events):
            if echo_every and i % echo_every == 0:
                # The client's key, echoed split across two reads: some of these straddle a part boundary.
                half = len(auth) // 2
                await resp.write(b": " + auth[:half])
                await resp.write(auth[half:] + b"\n\n")
            await resp.write(event)
            if echo_every and i % 10 == 0:
                await asyncio.sleep(0.001)  # reads arrive apart, so that parts end between them
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


async def ask(url: str, stream: bool) -> str:
    request = {"model": "big-model", "messages": [{"role": "user", "content": "long"}], "stream": stream}
    headers = {"Authorization": f"Bearer {KEY}"}
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session,
        session.post(f"{url}/v1/chat/completions", json=request, headers=headers) as resp,
    ):
        assert resp.status == 200
        return hashlib.sha256(await resp.read()).hexdigest()


async def test_a_large_answer_is_written_in_parts_and_every_reader_gets_it_back_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = json_body(3 << 20)
    events = sse_events(6000)
    cassettes = tmp_path / "cassettes"
    async for url in serve(big_app(body, events)):
        recorder = await start_proxy(upstream=url, cassettes=cassettes)
        assert recorder.recording.sink is not None
        recorder.recording.sink.spill_bytes = SPILL
        assert await ask(recorder.url, False) == hashlib.sha256(body).hexdigest()
        assert await ask(recorder.url, True) == hashlib.sha256(b"".join(events)).hexdigest()
        await recorder.close()
    path = recorder.cassette_path
    assert path is not None
    found = kinds(path)
    # Parts are at least SPILL bytes (a read that arrives when the held ones pass it goes with them).
    assert found.count("exchange") == 2 and 4 <= found.count("part") <= 2 * (3 << 20) // SPILL, found

    reader = CassetteReader(path)
    whole, streamed = list(reader)
    assert reader.problem is None
    assert b"".join(whole.response.chunks) == body and whole.response.raw_bytes == len(body)
    assert b"".join(streamed.response.chunks) == b"".join(events)
    for record in (whole, streamed):
        response = record.response
        assert response.parts == [] and len(response.chunk_us) == len(response.chunks) >= 2
        assert all(d >= 0 for d in response.chunk_us)
        assert record.timing.first_byte == response.chunk_us[0]
        assert sum(response.chunk_us) <= record.timing.end
        assert (record.upstream.model, record.outcome) == ("big-model", "complete")
    assert whole.upstream.system_fingerprint == "fp_big"
    assert streamed.timing.first_token == streamed.response.chunk_us[0]
    assert KEY not in json.dumps(msgspec.to_builtins(whole.request.headers))

    # The seek index (bench view) reads one exchange and its parts from their frames.
    index = SeekIndex(path)
    assert index.read([whole.id, streamed.id]) == {whole.id: whole, streamed.id: streamed}
    assert index.scans == 0

    assert main(["cassette", "export", str(path), "--format", "jsonl", "-o", str(tmp_path / "x.jsonl")]) == 0
    exported = [json.loads(line) for line in (tmp_path / "x.jsonl").read_text().splitlines()]
    assert len(exported) == 2
    assert main(["rescore", str(path), "--jobs", "1"]) == 0
    capsys.readouterr()

    player = await start_proxy(upstream=None, cassettes=cassettes, mode="replay", pace="instant")
    try:
        assert await ask(player.url, False) == hashlib.sha256(body).hexdigest()
        assert await ask(player.url, True) == hashlib.sha256(b"".join(events)).hexdigest()
    finally:
        await player.close()
    assert player.stats.replayed == 2 and player.stats.misses == 0


async def test_a_key_echoed_across_part_boundaries_never_reaches_the_file(tmp_path: Path) -> None:
    events = sse_events(3000)
    async for url in serve(big_app(b"{}", events, echo_every=7)):
        recorder = await start_proxy(upstream=url, cassettes=tmp_path)
        assert recorder.recording.sink is not None
        recorder.recording.sink.spill_bytes = 32 << 10
        await ask(recorder.url, True)
        await recorder.close()
    path = recorder.cassette_path
    assert path is not None
    assert kinds(path).count("part") > 20
    raw = zstandard.ZstdDecompressor().decompressobj().decompress(path.read_bytes())
    data = b"".join(zstandard.ZstdDecompressor().decompressobj().decompress(f) for f in split_frames(path.read_bytes()))
    for form in secret_forms(KEY):
        assert form not in raw and form not in data
    _, [record] = read_cassette(path)
    text = b"".join(record.response.chunks)
    assert text.count(b"[REDACTED]") == len(range(0, len(events), 7))
    assert "scrubbed:response.chunks" in record.redacted
    # What is not a secret is kept byte for byte: the events, in order.
    assert re.sub(rb": \[REDACTED\]\n\n", b"", text) == b"".join(events)


def split_frames(data: bytes) -> list[bytes]:
    magic = b"\x28\xb5\x2f\xfd"
    starts = [m.start() for m in re.finditer(re.escape(magic), data)]
    return [data[a:b] for a, b in zip(starts, [*starts[1:], len(data)], strict=True)]


@settings(max_examples=200)
@given(
    sizes=st.lists(st.integers(1, 40), min_size=1, max_size=60),
    at=st.lists(st.integers(0, 2000), max_size=4),
    every=st.integers(16, 200),
    hold=st.integers(0, 64),
)
def test_scrubbing_in_parts_finds_every_secret_and_changes_nothing_else(
    sizes: list[int], at: list[int], every: int, hold: int
) -> None:
    secret = "k3y-" + "s" * 10
    filler = bytes(range(97, 123)) * 100
    body = bytearray(filler[: sum(sizes)])
    for pos in sorted(at):
        pos = min(pos, len(body))
        body[pos:pos] = secret.encode()
    reads: list[bytes] = []
    pos = 0
    for size in [*sizes, len(body)]:
        if pos < len(body):
            reads.append(bytes(body[pos : pos + size]))
            pos += size
    scrubber = BodyScrubber(list(secret_forms(secret)))
    written: list[bytes] = []
    held: list[bytes] = []
    for read in reads:  # as the proxy does: a spill whenever the held reads pass `every` bytes
        held.append(read)
        if sum(map(len, held)) >= every:
            steps = scrubber.split_steps(held, hold)
            while True:
                try:
                    next(steps)
                except StopIteration as done:
                    out, held = done.value
                    break
            written += out
    tail = scrub_reads(held, scrubber.forms)
    written += held if tail is None else tail
    assert len(written) == len(reads)  # every read keeps its place (and its time)
    joined = b"".join(written)
    assert secret.encode() not in joined
    assert joined.replace(b"[REDACTED]", b"") == bytes(body).replace(secret.encode(), b"")


async def test_a_flipped_byte_in_a_part_is_reported_and_nothing_changed_is_returned(tmp_path: Path) -> None:
    body = json_body(2 << 20)
    async for url in serve(big_app(body, [])):
        recorder = await start_proxy(upstream=url, cassettes=tmp_path)
        assert recorder.recording.sink is not None
        recorder.recording.sink.spill_bytes = SPILL
        await ask(recorder.url, False)
        await ask(recorder.url, False)
        await recorder.close()
    path = recorder.cassette_path
    assert path is not None
    clean = path.read_bytes()
    for where in (0.25, 0.5, 0.75):
        damaged = bytearray(clean)
        at = int(len(clean) * where)
        beyond_repair(damaged, at, 0x20)
        copy = tmp_path / f"flip-{where}.cassette"
        copy.write_bytes(bytes(damaged))
        reader = CassetteReader(copy)
        got = list(reader)
        assert all(b"".join(r.response.chunks) == body for r in got)
        assert len(got) < 2 and reader.problem is not None and str(copy) in reader.problem
        assert "\n" not in reader.problem


async def drain_body(resp: aiohttp.ClientResponse) -> None:
    try:
        while await resp.content.readany():
            pass
    except aiohttp.ClientError:
        pass  # the proxy was killed


async def test_kill_9_mid_answer_loses_only_that_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stalled = asyncio.Event()
    killed = asyncio.Event()

    async def chat(request: web.Request) -> web.StreamResponse:
        payload = await request.json()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        events = sse_events(3 if payload["model"] == "small" else 70000)  # ~13 MB: past 8 MiB
        for event in events[:-2] if payload["model"] != "small" else events:
            await resp.write(event)
        if payload["model"] != "small":
            stalled.set()
            await asyncio.wait_for(killed.wait(), 120)  # the answer never ends: the proxy is killed meanwhile
            return resp
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    async for url in serve(app):
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench", "proxy", "--port", "0", "--upstream", url, "--cassettes", str(tmp_path),
            cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        assert proc.stdout is not None
        try:
            proxy_url = cassette = None
            while cassette is None:
                line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
                assert line, "bench proxy exited before listening"
                if m := re.search(r"listening on (http://\S+)", line):
                    proxy_url = m.group(1)
                if m := re.search(r"writing (\S+)", line):
                    cassette = Path(m.group(1))
            assert proxy_url is not None
            async with aiohttp.ClientSession() as session:
                request = {"model": "small", "messages": [], "stream": True}
                async with session.post(f"{proxy_url}/v1/chat/completions", json=request) as resp:
                    await resp.read()
                request["model"] = "big"
                async with session.post(f"{proxy_url}/v1/chat/completions", json=request) as resp:
                    drain = asyncio.create_task(drain_body(resp))  # a client that reads what it gets
                    await stalled.wait()
                    # The big answer's first 4 MiB are a part record in the file before the kill.
                    for _ in range(600):
                        if kinds(cassette).count("part"):
                            break
                        await asyncio.sleep(0.1)
                    os.kill(proc.pid, signal.SIGKILL)
                    await proc.wait()
                    killed.set()
                    await drain
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert kinds(cassette).count("part") >= 1
    reader = CassetteReader(cassette)
    [small] = list(reader)
    assert small.tags == {} and small.outcome == "complete"
    assert reader.problem is not None and "never ended" in reader.problem and "\n" not in reader.problem
    capsys.readouterr()
    main(["cassette", "ls", str(cassette)])
    out = capsys.readouterr()
    assert "never ended" in out.out + out.err and "Traceback" not in out.out + out.err
    assert main(["rescore", str(cassette), "--jobs", "1"]) == 0
    out = capsys.readouterr()
    assert "never ended" in out.out + out.err


async def test_a_rotation_mid_answer_keeps_the_answer_whole_in_the_cassette_that_holds_its_parts(
    tmp_path: Path,
) -> None:
    from bench.proxy.rotation import Rotator

    events = sse_events(4000)
    half = len(events) // 2
    first_half_sent = asyncio.Event()
    go_on = asyncio.Event()

    async def chat(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i, event in enumerate(events):
            if i == half:
                first_half_sent.set()
                await asyncio.wait_for(go_on.wait(), 60)
            await resp.write(event)
            if i % 20 == 0:
                await asyncio.sleep(0.001)
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    async for url in serve(app):
        recorder = await start_proxy(upstream=url, cassettes=tmp_path)
        assert recorder.recording.sink is not None
        first_sink = recorder.recording.sink
        first_sink.spill_bytes = 32 << 10
        rotator = Rotator(recorder)
        asking = asyncio.create_task(ask(recorder.url, True))
        await first_half_sent.wait()
        for _ in range(600):  # until a part is written (the reads arrive apart)
            if first_sink._open:  # the exchange has written a part
                break
            await asyncio.sleep(0.05)
        first = recorder.cassette_path
        second = await rotator.rotate()
        go_on.set()
        assert await asking == hashlib.sha256(b"".join(events)).hexdigest()
        await rotator.stop()
        await recorder.close()
    assert first is not None and "part" in kinds(first)
    reader = CassetteReader(first)
    [record] = list(reader)
    assert reader.problem is None and b"".join(record.response.chunks) == b"".join(events)
    assert [r.id for r in CassetteReader(second)] == []


def hold_writer(writer: object) -> tuple[threading.Event, threading.Event]:
    """Fault injection: the cassette writer's thread blocks before each file write until `gate` is set; `held` is
    set once it is blocked."""
    gate = threading.Event()
    held = threading.Event()
    write_all = writer._write_all  # type: ignore[attr-defined]

    def stalled(data: bytes) -> None:
        held.set()
        gate.wait(60)  # the test lets it go; 60 s only so that a failing test cannot hang the suite
        write_all(data)

    writer._write_all = stalled  # type: ignore[attr-defined]
    return gate, held


async def test_waiting_on_a_held_cassette_writer_never_counts_as_the_upstream_being_idle(tmp_path: Path) -> None:
    """The writer's thread is held (a stalled disk) for three idle timeouts while an answer spills. The exchange
    waits for its previous part meanwhile and does not read the upstream: that is the proxy's own wait, so the idle
    watchdog must not cut the answer. The answer arrives whole and is recorded complete."""
    # 1.4 MB: however the reads are cut (at most 256 KiB each), the exchange writes a part and then, with more than
    # 64 KiB held after a read, waits for it before the body ends.
    events = sse_events(8000)
    idle = 1.0  # long enough that the upstream (in this loop, on a busy machine) is never idle that long on its own
    async for url in serve(big_app(b"{}", events)):
        recorder = await start_proxy(upstream=url, cassettes=tmp_path, idle_timeout=idle)
        sink = recorder.recording.sink
        assert sink is not None
        sink.spill_bytes = 32 << 10
        gate, held = hold_writer(sink.writer)
        asking = asyncio.create_task(ask(recorder.url, True))
        await asyncio.to_thread(held.wait, 60)
        await asyncio.sleep(idle * 3)  # the writer holds the first part for three idle timeouts
        gate.set()
        assert await asking == hashlib.sha256(b"".join(events)).hexdigest()
        await recorder.close()
    path = recorder.cassette_path
    assert path is not None and kinds(path).count("part") >= 2
    reader = CassetteReader(path)
    [record] = list(reader)
    assert reader.problem is None
    assert (record.outcome, record.error, record.response.cut) == ("complete", None, False)
    assert b"".join(record.response.chunks) == b"".join(events)
