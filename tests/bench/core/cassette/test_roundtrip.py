from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import msgpack
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.core.cassette import CassetteReader, CassetteWriter, Redactor, read_cassette, repair
from bench.core.cassette.format import FORMAT_VERSION
from bench.core.cassette.records import Exchange, RunMeta, Settings
from bench.core.cassette.writer import WriterClosed
from bench.core.errors import CassetteError
from tests.support.records import exchange as make_exchange

SECRET = "sk-live-0123456789abcdef"


def exchange(i: int, chunks: list[bytes], **extra: Any) -> Exchange:
    return make_exchange(
        {
            "id": f"x{i}",
            "request": {
                "method": "POST",
                "path": "/v1/chat/completions",
                "query": "",
                "headers": [["Authorization", f"Bearer {SECRET}"], ["Content-Type", "application/json"]],
                "body": b'{"model":"m"}',
            },
            "response": {"status": 200, "headers": [], "chunks": chunks, "chunk_us": [1] * len(chunks)},
            **extra,
        }
    )


def test_roundtrip_keeps_bytes_and_closes_cleanly(tmp_path: Path) -> None:
    path = tmp_path / "a.cassette"
    chunks = [b"data: {}\n\n", b"\x00\xff binary", b""]
    with CassetteWriter(path, settings=Settings(mode="record"), run=RunMeta(id="r1")) as w:
        for i in range(3):
            w.put(exchange(i, chunks))
    reader = CassetteReader(path)
    records = list(reader)
    assert reader.header.version == FORMAT_VERSION
    assert reader.header.run == RunMeta(id="r1")
    assert [r.id for r in records] == ["x0", "x1", "x2"]
    assert records[0].response.chunks == chunks
    assert not reader.truncated and reader.end is not None and reader.end.exchanges == 3


def test_secrets_never_reach_the_file(tmp_path: Path) -> None:
    path = tmp_path / "s.cassette"
    redactor = Redactor.with_extra(headers=["X-Custom-Token"], json_fields=["password"])
    rec = exchange(0, [f'data: {{"echo":"{SECRET}"}}\n\n'.encode()])
    rec.request.headers.append(["X-Custom-Token", "tok-ABCDEFGHIJ"])
    rec.request.query = "api-key=querysecret123&x=1"
    rec.request.body = b'{"model":"m","password":"hunter2hunter2"}'
    rec.error = f"upstream said: bad key {SECRET}"
    with CassetteWriter(path, redactor=redactor) as w:
        w.put(rec)
    raw = zstandard.ZstdDecompressor().decompressobj().decompress(path.read_bytes())
    for secret in (SECRET, "tok-ABCDEFGHIJ", "querysecret123", "hunter2hunter2"):
        assert secret.encode() not in raw
    _, [got] = read_cassette(path)
    assert "request.headers.authorization" in got.redacted
    assert "request.body.password" in got.redacted
    assert got.response.chunks == [b'data: {"echo":"[REDACTED]"}\n\n']


def test_truncated_file_returns_finished_records(tmp_path: Path) -> None:
    path = tmp_path / "t.cassette"
    w = CassetteWriter(path)
    for i in range(5):
        w.put(exchange(i, [b"data: x\n\n"] * 10))
    # Let the writer thread flush, then simulate a crash: no close, no end record.
    w._cond.acquire()
    while w._queue:
        w._cond.wait(0.01)
    w._cond.release()
    while w.stats.records < 6:
        time.sleep(0.001)
    reader = CassetteReader(path)
    assert len(list(reader)) == 5
    assert reader.truncated and reader.end is None


def test_kill_9_leaves_every_finished_exchange(tmp_path: Path) -> None:
    path = tmp_path / "k.cassette"
    script = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from bench.core.cassette import CassetteWriter
        from bench.core.cassette.records import Exchange, Response
        w = CassetteWriter(Path({str(path)!r}))
        for i in range(20):
            w.put(Exchange(id=f"x{{i}}", response=Response(chunks=[b"data: y\\n\\n"] * 50)))
        while w.stats.records < 21:
            time.sleep(0.001)
        print("ready", flush=True)
        time.sleep(60)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"ready"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    reader = CassetteReader(path)
    assert [r.id for r in reader] == [f"x{i}" for i in range(20)]
    assert reader.truncated


def test_foreign_and_newer_files_get_one_line_errors(tmp_path: Path) -> None:
    foreign = tmp_path / "f.cassette"
    foreign.write_text("hello")
    with pytest.raises(CassetteError, match="not a bench cassette"):
        CassetteReader(foreign)
    other_zstd = tmp_path / "z.cassette"
    other_zstd.write_bytes(zstandard.ZstdCompressor().compress(msgpack.packb({"kind": "x"})))
    with pytest.raises(CassetteError, match="not a bench cassette"):
        CassetteReader(other_zstd)
    newer = tmp_path / "n.cassette"
    header = {"kind": "header", "format": "bench-cassette", "version": FORMAT_VERSION + 1}
    newer.write_bytes(zstandard.ZstdCompressor().compress(msgpack.packb(header)))
    with pytest.raises(CassetteError, match="upgrade bench"):
        CassetteReader(newer)
    with pytest.raises(CassetteError, match="cannot open"):
        CassetteReader(tmp_path / "missing.cassette")


async def test_full_queue_waits_without_blocking_the_loop_and_drops_nothing(tmp_path: Path) -> None:
    path = tmp_path / "q.cassette"
    w = CassetteWriter(path, max_queue_bytes=1)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    for i in range(200):
        await w.put_async(exchange(i, [b"z" * 5000]))
    task.cancel()
    await w.aclose()
    _, records = read_cassette(path)
    assert len(records) == 200
    assert w.stats.queue_full_waits > 0
    assert ticks > 0


async def test_put_durable_returns_once_the_record_is_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "d.cassette"
    w = CassetteWriter(path)
    for i in range(3):
        await asyncio.gather(*(w.put_durable(exchange(10 * i + k, [b"chunk %d" % k])) for k in range(4)))
        # Read while the writer is still open, as a reader after kill -9 would.
        reader = CassetteReader(path)
        assert [r.id for r in reader] == [f"x{10 * j + k}" for j in range(i + 1) for k in range(4)]
        assert reader.truncated
    await w.aclose()
    with pytest.raises(WriterClosed):
        await w.put_durable(exchange(99, [b"late"]))


async def test_records_queued_together_are_numbered_in_order_and_each_can_be_awaited(tmp_path: Path) -> None:
    path = tmp_path / "b.cassette"
    w = CassetteWriter(path)
    last = await w.put_packed([w.pack_exchange(exchange(i, [b"chunk %d" % i])) for i in range(5)])
    assert last == 5
    loop = asyncio.get_running_loop()
    written = [loop.create_future() for _ in range(last)]
    for ticket, future in enumerate(written, 1):
        w.when_written(ticket, future)
    await asyncio.wait_for(asyncio.gather(*written), 5)
    assert [r.id for r in CassetteReader(path)] == [f"x{i}" for i in range(5)]
    late: asyncio.Future[None] = loop.create_future()
    w.when_written(3, late)  # already in the file: settled at once
    assert late.done()
    await w.aclose()


async def test_put_durable_fails_when_the_file_cannot_be_written(tmp_path: Path) -> None:
    w = CassetteWriter(tmp_path / "f.cassette")
    os.close(w._fd)  # the next write fails as a full or removed disk would
    with pytest.raises(WriterClosed, match="failed"):
        await asyncio.wait_for(w.put_durable(exchange(1, [b"x"])), 5)
    w._fd = os.open(os.devnull, os.O_WRONLY)  # for close() to close
    w.close()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    bodies=st.lists(st.lists(st.binary(max_size=64), max_size=6), min_size=1, max_size=5),
    where=st.integers(min_value=0, max_value=10_000),
)
def test_truncation_at_any_byte_never_invents_or_corrupts(
    tmp_path: Path, bodies: list[list[bytes]], where: int
) -> None:
    path = tmp_path / "h.cassette"
    path.unlink(missing_ok=True)
    with CassetteWriter(path) as w:
        for i, chunks in enumerate(bodies):
            w.put(exchange(i, chunks))
    full = path.read_bytes()
    # The header holds the creation time, so the length varies: draw a position, not an offset.
    cut = len(full) * where // 10_000
    path.write_bytes(full[:cut])
    try:
        reader = CassetteReader(path)
    except CassetteError:
        return  # cut before the header was complete: a clear error, nothing to return
    got = list(reader)
    assert len(got) <= len(bodies)
    for i, rec in enumerate(got):
        assert rec.id == f"x{i}" and rec.response.chunks == bodies[i]
    assert reader.truncated == (cut < len(full))


def test_a_file_cut_just_before_its_last_repair_frame_says_it_was_cut(tmp_path: Path) -> None:
    """Every record is there, but the file is not whole: it was cut at the one offset where no frame is left open
    (hypothesis found it when the header's length put a drawn position there)."""
    path = tmp_path / "r.cassette"
    with CassetteWriter(path) as w:
        for i in range(3):
            w.put(exchange(i, [b"data: %d\n\n" % j for j in range(5)]))
    full = path.read_bytes()
    # The last repair frame: the last magic from which one repair frame reaches exactly the file's end.
    starts = [at for at in range(len(full)) if full.startswith(repair.MAGIC, at)]
    last = next(at for at in reversed(starts) if (r := repair.read_at(full, at)) is not None and r.end == len(full))
    path.write_bytes(full[:last])
    reader = CassetteReader(path)
    assert [r.id for r in reader] == ["x0", "x1", "x2"]
    assert reader.end is not None and reader.truncated and not reader.damaged
    assert reader.problem is not None and "cut after its end record" in reader.problem
    path.write_bytes(full)
    whole = CassetteReader(path)
    assert len(list(whole)) == 3 and not whole.truncated and whole.problem is None


def test_every_byte_cut_of_a_real_file(tmp_path: Path) -> None:
    path = tmp_path / "all.cassette"
    with CassetteWriter(path) as w:
        for i in range(4):
            w.put(exchange(i, [b"data: %d\n\n" % j for j in range(30)]))
    full = path.read_bytes()
    counts = []
    for cut in range(len(full) + 1):
        path.write_bytes(full[:cut])
        try:
            counts.append(len(list(CassetteReader(path))))
        except CassetteError:
            counts.append(-1)
    assert counts[-1] == 4
    assert counts == sorted(counts), "a longer prefix never reads fewer records"
