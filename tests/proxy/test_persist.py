"""Records built by one task a slice at a time (bench.proxy.persist), with real exchanges and a real cassette writer."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from time import monotonic_ns

import pytest

from bench.core.cassette import CassetteReader, CassetteWriter
from bench.core.cassette.records import Request, Response
from bench.proxy import persist
from bench.proxy.persist import Persister
from bench.proxy.recorder import Exchange
from bench.proxy.state import ProxyStats


def finished(i: int, body: bytes | None = None) -> Exchange:
    if body is None:
        body = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": f"hi {i}"}]}).encode()
    headers = [["Content-Type", "application/json"]]
    request = Request(method="POST", path="/v1/chat/completions", headers=headers, body=body)
    ex = Exchange(t0=monotonic_ns(), started_us=0, mode="record", request=request, tags={}, upstream_url="http://u:9")
    head = Response(status=200, headers=[["Content-Type", "text/event-stream"]], streamed=True)
    ex.answered(head, monotonic_ns(), frozenset())
    role = b'data: {"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
    token = b'data: {"model":"m","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]}\n\n'
    for chunk in (role, token, b"data: [DONE]\n\n"):
        ex.chunks.append(chunk)
        ex.times.append(monotonic_ns())
    return ex


async def test_the_loop_runs_between_the_steps_of_building_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(persist, "SLICE_NS", 0)  # yield after every step
    writer = CassetteWriter(tmp_path / "p.cassette")
    records = Persister(writer, ProxyStats())
    ticks = 0

    async def other_work() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(other_work())
    for i in range(5):
        records.later(finished(i), monotonic_ns())
    assert records.task is not None
    await records.task
    ticker.cancel()
    # Per record, a yield after: the end check, the role read (the next one holds the first token), the fingerprint,
    # the record; then it is packed. The other task ran at each.
    assert ticks >= 5 * 4
    await writer.aclose()
    got = list(CassetteReader(writer.path))
    assert [r.id for r in got] == [f"x{i}" for i in range(1, 6)]
    assert all(r.request.fp.startswith("fp1:") and r.timing.first_token is not None for r in got)


async def test_durable_returns_once_the_record_is_in_the_file(tmp_path: Path) -> None:
    writer = CassetteWriter(tmp_path / "d.cassette")
    stats = ProxyStats()
    records = Persister(writer, stats)
    await asyncio.gather(*(records.durable(finished(i), monotonic_ns()) for i in range(40)))
    # Read while the writer is open, as a reader after kill -9 would.
    assert [r.id for r in CassetteReader(writer.path)] == [f"x{i}" for i in range(1, 41)]
    assert stats.exchanges == 40 and stats.lost == 0
    await writer.aclose()


async def test_a_request_body_with_a_lone_surrogate_is_recorded(tmp_path: Path) -> None:
    # Valid JSON with no UTF-8 text (half a surrogate pair): the record is written, its fingerprint the raw body's.
    ex = finished(0, b'{"model":"m","stream":true,"messages":[{"role":"user","content":"\\ud800"}]}')
    writer = CassetteWriter(tmp_path / "s.cassette")
    stats = ProxyStats()
    await Persister(writer, stats).durable(ex, monotonic_ns())
    await writer.aclose()
    (got,) = list(CassetteReader(writer.path))
    head = b"POST /v1/chat/completions?\n"
    assert got.request.fp == "fp1:" + hashlib.sha256(head + b"raw:" + ex.request.body).hexdigest()[:32]
    assert got.request.body == ex.request.body and stats.exchanges == 1 and stats.lost == 0
