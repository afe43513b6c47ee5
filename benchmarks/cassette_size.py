"""Cassette format v1 against v2, side by side in one run: size, writer CPU per exchange, close and read cost.

    .venv/bin/python benchmarks/cassette_size.py [--rounds 7]

Two sets of exchanges:
  - the shipped real recording (cassettes/smollm2-135m-catalog.cassette: 180 exchanges of SmolLM2-135M);
  - a mock recording made here through the real proxy: 20 streams of ~200-byte SSE chunks from a paced loopback
    upstream (the kind of short streams where the envelope and the arrival times weigh most).
For each: the ratio raw traffic (request bodies + response bytes) / file bytes for v1 (one zstd frame, level 3, a
block flush per exchange, times as msgpack integers), for v2 as written live (level 3, a block flush per exchange,
framed and checksummed records, the time column) and for v2 once closed (recompressed); the CPU per exchange of
packing (the proxy's event loop) and of compressing and writing (the writer thread), v2 / v1 as ratios of medians of
interleaved rounds; the close-time recompression; the reading speed v2 / v1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import msgpack  # noqa: E402
import msgspec  # noqa: E402
import zstandard  # noqa: E402

from bench.cli.cassette_command import traffic_bytes  # noqa: E402
from bench.core.cassette import CassetteReader, CassetteWriter, Redactor  # noqa: E402
from bench.core.cassette.compact import compact, level_for  # noqa: E402
from bench.core.cassette.records import Exchange, Header  # noqa: E402
from bench.core.cassette.writer import Packed  # noqa: E402
from tests.support.serve import serve_on_loopback  # noqa: E402

Record = dict[str, Any]
SHIPPED = ROOT / "cassettes" / "smollm2-135m-catalog.cassette"


# -- the two writers, one exchange per batch (a recording at low concurrency: the most flushes) -------------------


class V1:
    """bench 0.1's writer path: msgpack in the caller, then compress + block flush + write in the writer thread."""

    def __init__(self, path: Path, header: Header) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.packer = msgpack.Packer(use_bin_type=True)
        self.redactor = Redactor()
        self.cobj = zstandard.ZstdCompressor(level=3).compressobj()
        self.write(bytes(self.packer.pack({**msgspec.to_builtins(header), "version": 1})))

    def pack(self, record: Exchange) -> bytes:
        # Redaction changes nothing in these records (they were redacted when recorded): no copy is needed.
        self.redactor.redact_exchange(record)
        return bytes(self.packer.pack(msgspec.to_builtins(record, builtin_types=(bytes,))))

    def write(self, data: bytes, end: bool = False) -> None:
        flush = zstandard.COMPRESSOBJ_FLUSH_FINISH if end else zstandard.COMPRESSOBJ_FLUSH_BLOCK
        os.write(self.fd, self.cobj.compress(data) + self.cobj.flush(flush))

    def close(self, end: Record) -> None:
        self.write(bytes(self.packer.pack(end)), end=True)
        os.close(self.fd)


class V2:
    """The real CassetteWriter's two halves, called in this thread so that each is timed alone."""

    def __init__(self, path: Path, header: Header) -> None:
        self.w = CassetteWriter(path, settings=header.settings, run=header.run, compact_on_close=False)

    def pack(self, record: Exchange) -> Packed:
        return self.w.pack_exchange(record)

    def write(self, data: Packed) -> None:
        self.w._write_now([data])

    def close(self, end: Record) -> None:
        with self.w._cond:
            self.w._closing = True
            self.w._cond.notify_all()
        self.w._thread.join()
        self.w._write_now([(msgpack.packb(end, use_bin_type=True), None)], end_frame=True)
        os.close(self.w._fd)


def write(
    kind: type[V1] | type[V2], path: Path, header: Header, records: list[Exchange], end: Record
) -> tuple[float, float]:
    """Write a cassette; returns (pack CPU s, compress+write CPU s) per exchange."""
    writer = kind(path, header)
    pack = write_t = 0.0
    for record in records:
        t0 = time.thread_time()
        data = writer.pack(record)
        t1 = time.thread_time()
        writer.write(data)
        t2 = time.thread_time()
        pack += t1 - t0
        write_t += t2 - t1
    writer.close(end)
    return pack / len(records), write_t / len(records)


def read_all(path: Path) -> int:
    return sum(1 for _ in CassetteReader(path))


# -- the mock recording -------------------------------------------------------------------------------------------


async def mock_records(directory: Path, streams: int = 20, tokens: int = 40) -> list[Exchange]:
    """20 paced streams of ~200-byte chunks through the real proxy in record mode; its records as read back."""
    import aiohttp
    import proxy_overhead
    from aiohttp import web

    from bench.proxy import start_proxy

    proxy_overhead._VOCAB = proxy_overhead._vocabulary()

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "x-request-id": "req"})
        await response.prepare(request)
        for chunk in proxy_overhead.stream_chunks(int(body["seed"]), tokens):
            await asyncio.sleep(0.004)
            await response.write(chunk)
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner, url = await serve_on_loopback(app)
    recorder = await start_proxy(upstream=url, cassettes=directory)
    async with aiohttp.ClientSession() as session:

        async def one(seed: int) -> None:
            body = {
                "model": "bench-mock-7b",
                "stream": True,
                "seed": seed,
                "messages": [{"role": "user", "content": f"Story {seed}."}],
            }
            async with session.post(recorder.url + "/v1/chat/completions", json=body) as resp:
                await resp.read()

        await asyncio.gather(*(one(seed) for seed in range(streams)))
    await recorder.close()
    await runner.cleanup()
    assert recorder.cassette_path is not None
    records = list(CassetteReader(recorder.cassette_path))
    assert len(records) == streams
    return records


# -- the run ------------------------------------------------------------------------------------------------------


def median_ratio(pairs: list[tuple[float, float]]) -> float:
    return statistics.median(b for _, b in pairs) / statistics.median(a for a, _ in pairs)


def measure(name: str, header: Header, records: list[Exchange], rounds: int, tmp: Path) -> None:
    end = {"kind": "end", "closed": "x", "exchanges": len(records), "queue_full_waits": 0}
    raw = sum(traffic_bytes(r) for r in records)
    pack: list[tuple[float, float]] = []
    wr: list[tuple[float, float]] = []
    sizes: dict[str, int] = {}
    close_s: list[float] = []
    level = None
    reads: list[tuple[float, float]] = []
    for r in range(rounds):
        order: list[type[V1] | type[V2]] = [V1, V2] if r % 2 == 0 else [V2, V1]
        got: dict[str, tuple[float, float]] = {}
        for kind in order:
            path = tmp / f"{name}-{kind.__name__}-{r}.cassette"
            got[kind.__name__] = write(kind, path, header, records, end)
            sizes[kind.__name__] = path.stat().st_size
        pack.append((got["V1"][0], got["V2"][0]))
        wr.append((got["V1"][1], got["V2"][1]))
        v2 = tmp / f"{name}-V2-{r}.cassette"
        live = CassetteReader(v2)
        assert sum(1 for _ in live) == len(records)
        level = level_for(live.raw_size)  # as CassetteWriter.close chooses it
        t0 = time.process_time()
        assert compact(v2, live.raw_size)
        close_s.append(time.process_time() - t0)
        sizes["V2 closed"] = v2.stat().st_size
        v1 = tmp / f"{name}-V1-{r}.cassette"
        timed: dict[str, float] = {}
        for path in (v1, v2) if r % 2 == 0 else (v2, v1):
            t0 = time.process_time()
            assert read_all(path) == len(records)
            timed[path.name] = time.process_time() - t0
        reads.append((timed[v1.name], timed[v2.name]))
        for p in tmp.glob(f"{name}-*-{r}.cassette"):
            p.unlink()
    n = len(records)
    print(f"\n{name}: {n} exchanges, {raw / 1024:.0f} KiB of raw traffic")
    for label, key in (
        ("v1 (level 3, as bench 0.1 wrote)", "V1"),
        ("v2 live (level 3)", "V2"),
        ("v2 closed", "V2 closed"),
    ):
        print(f"  {label:34} {sizes[key]:>8} bytes  {raw / sizes[key]:5.1f}x")
    print(f"  close-time recompression (level {level}): {statistics.median(close_s) * 1000:.0f} ms CPU")
    v1p = statistics.median(a for a, _ in pack) * 1e6
    v1w = statistics.median(a for a, _ in wr) * 1e6
    print(f"  pack per exchange (event loop):       v1 {v1p:6.1f} us  v2/v1 {median_ratio(pack):.2f}")
    print(f"  compress+write per exchange (thread): v1 {v1w:6.1f} us  v2/v1 {median_ratio(wr):.2f}")
    print(f"  read, whole file:                     v2/v1 time {median_ratio(reads):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    shipped = CassetteReader(SHIPPED)
    shipped_records = list(shipped)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "mock").mkdir()
        mock = asyncio.run(mock_records(tmp / "mock"))
        mock_header = CassetteReader(next((tmp / "mock").glob("*.cassette"))).header
        print(f"{args.rounds} interleaved rounds; CPU is thread time, medians of rounds")
        measure("shipped SmolLM2 recording", shipped.header, shipped_records, args.rounds, tmp)
        measure("mock: 20 streams of ~200-byte chunks", mock_header, mock, args.rounds, tmp)


if __name__ == "__main__":
    main()
