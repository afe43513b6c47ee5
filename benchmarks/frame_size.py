"""What one flipped byte loses, and what bounding it costs: frames of fewer records (with and without a trained
dictionary) against repair frames (bench.core.cassette.repair), side by side in one run.

    .venv/bin/python benchmarks/frame_size.py [--flips 300] [--seed 1] [--frames]

By default: each cassette closed by today's writer (with repair frames) and the same file without them (the layout
before), ratio and the flip sweep of each. `--frames` adds the frame-size table below.

Cassettes: the shipped SmolLM2 recording (180 real exchanges, 3.2 MB raw), a 21-exchange mock recording made
through the real proxy (benchmarks/cassette_size.py's), and a `bench demo` cassette (the simulator, 3 models, ~150
exchanges). Each is written again as closed cassettes are (the close level for its size, blocks every 64 KiB) in
frames of at most N records, N from 1 to today's 4 MiB frames; with a dictionary, every frame is compressed with it.
Ratio: traffic bytes (request bodies and response reads) / file bytes. The dictionaries are trained held out: for
each cassette measured, on the other two sources' records only (simulator and mock for SmolLM2, simulator and
SmolLM2 for the mock, mock and SmolLM2 for the demo), so that no figure is the dictionary recalling its own input.

Damage: one bit flipped at `--flips` random places of each file (the same places, as fractions of the file, for
every layout), read back by CassetteReader; the exchanges lost, and the results lost (a (run, model, test, epoch)
any of whose exchanges is missing or changed), per flip: median, p90 and maximum.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import zstandard  # noqa: E402

from bench.cli.cassette_command import traffic_bytes  # noqa: E402
from bench.core.cassette import CassetteReader, CassetteWriter, frames, repair  # noqa: E402
from bench.core.cassette.compact import BLOCK_BYTES, level_for  # noqa: E402
from bench.core.cassette.envelope import record_ends  # noqa: E402
from bench.core.cassette.format import SEGMENT_BYTES  # noqa: E402
from bench.core.errors import CassetteError  # noqa: E402

SHIPPED = ROOT / "cassettes" / "smollm2-135m-catalog.cassette"
FRAME_RECORDS = (1, 2, 4, 8, 16, 32, None)  # None: today's frames of SEGMENT_BYTES
DICT_BYTES = (16 << 10, 64 << 10)


def raw_records(path: Path) -> tuple[bytes, list[bytes]]:
    """The header frame as written, and every framed record after it (prefix + payload, as the writer frames)."""
    buf = frames.open_bytes(path)
    data = bytearray()
    head = b""
    for event in frames.walk(buf):
        if isinstance(event, frames.Data) and event.frame > 0:
            data += event.data
        elif isinstance(event, frames.FrameEnd) and event.frame == 0:
            head = bytes(buf[: event.end])
    records, start = [], 0
    for end in record_ends(data):
        records.append(bytes(data[start:end]))
        start = end
    return head, records


def layout(
    records: list[bytes], per_frame: int | None, level: int, zdict: zstandard.ZstdCompressionDict | None
) -> Iterator[bytes]:
    """The records in zstd frames of at most `per_frame` records (or SEGMENT_BYTES of them), blocks every
    BLOCK_BYTES, the last record (the end record) alone in the last block, as compact.segment_frames writes."""
    cctx = zstandard.ZstdCompressor(level=level, dict_data=zdict)
    group: list[bytes] = []
    size = 0
    for i, rec in enumerate(records):
        group.append(rec)
        size += len(rec)
        last = i == len(records) - 1
        if last or (per_frame is not None and len(group) >= per_frame) or size >= SEGMENT_BYTES:
            cobj = cctx.compressobj()
            parts, block = [], 0
            for j, r in enumerate(group):
                parts.append(cobj.compress(r))
                block += len(r)
                if j < len(group) - 1 and (block >= BLOCK_BYTES or (last and j == len(group) - 2)):
                    parts.append(cobj.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK))
                    block = 0
            parts.append(cobj.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH))
            yield b"".join(parts)
            group, size = [], 0


def keys_of(path: Path | bytes, tmp: Path) -> dict[str, tuple[tuple[str, str, str, str], bytes]] | None:
    if isinstance(path, bytes):
        target = tmp / "damaged.cassette"
        target.write_bytes(path)
        path = target
    try:
        reader = CassetteReader(path)
        out = {}
        for r in reader:
            key = (r.tags.get("run", ""), r.tags.get("model", ""), r.tags.get("test", r.id), r.tags.get("epoch", ""))
            out[r.id] = (key, b"".join(r.response.chunks))
        return out
    except CassetteError:
        return None


def damage_sweep(
    data: bytes,
    original: dict[str, tuple[tuple[str, str, str, str], bytes]],
    places: list[tuple[float, int]],
    tmp: Path,
) -> tuple[list[int], list[int]]:
    all_results = {k for k, _ in original.values()}
    lost_ex, lost_res = [], []
    for where, bit in places:
        b = bytearray(data)
        i = min(len(b) - 1, int(where * len(b)))
        b[i] ^= 1 << bit
        got = keys_of(bytes(b), tmp) or {}
        missing = [i for i, (k, body) in original.items() if got.get(i, (None, None))[1] != body]
        lost_ex.append(len(missing))
        bad = {original[i][0] for i in missing}
        lost_res.append(len(bad & all_results))
    return lost_ex, lost_res


def stats(xs: list[int]) -> str:
    s = sorted(xs)
    return f"{statistics.median(s):5.0f} {s[int(0.9 * (len(s) - 1))]:5d} {s[-1]:5d}"


def demo_cassette(tmp: Path) -> Path:
    out = tmp / "demo"
    subprocess.run(
        [sys.executable, "-m", "bench", "demo", "--quiet", "--out", str(out)], check=True, capture_output=True
    )
    return next(out.glob("*.cassette"))


def mock_cassette(tmp: Path) -> Path:
    import cassette_size

    (tmp / "mock").mkdir()
    asyncio.run(cassette_size.mock_records(tmp / "mock", streams=21))
    return next((tmp / "mock").glob("*.cassette"))


def samples(records: list[bytes]) -> list[bytes]:
    return records[:-1]  # not the end record


def without_repairs(data: bytes) -> bytes:
    """The file with its repair frames taken out: the layout bench wrote before them, byte for byte."""
    out, pos = bytearray(), 0
    for event in frames.walk(data):
        if isinstance(event, frames.FrameEnd):
            out += data[pos : repair.find(data, pos, len(data)).at]  # type: ignore[union-attr]
            pos = event.end
    return bytes(out)


def closed_again(path: Path, tmp: Path) -> Path:
    """The cassette written again and closed by today's writer (its records as read)."""
    reader = CassetteReader(path)
    records = list(reader)
    target = tmp / f"again-{path.name}"
    with CassetteWriter(target, settings=reader.header.settings, run=reader.header.run) as w:
        for record in records:
            w.put(record)
    return target


def repair_table(sources: dict[str, Path], places: list[tuple[float, int]], tmp: Path) -> None:
    print("\nrepair frames: each cassette closed by the writer, with them (now) and without (before)")
    print(
        f"  {'cassette':22} {'layout':8} {'bytes':>8} {'ratio':>7}   exchanges lost/flip (p50 p90 max mean)"
        "   results lost/flip (p50 p90 max mean)"
    )
    for name, path in sources.items():
        now = closed_again(path, tmp)
        traffic = sum(traffic_bytes(r) for r in CassetteReader(now))
        original = keys_of(now, tmp)
        assert original is not None
        for label, data in (("before", without_repairs(now.read_bytes())), ("now", now.read_bytes())):
            ex, res = damage_sweep(data, original, places, tmp)
            print(
                f"  {name:22} {label:8} {len(data):8d} {traffic / len(data):6.1f}x   "
                f"{stats(ex)} {statistics.mean(ex):5.1f}                  {stats(res)} {statistics.mean(res):5.1f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--flips", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--frames", action="store_true", help="also the frame-size and dictionary table")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    places = [(rng.random(), rng.randrange(8)) for _ in range(args.flips)]
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        sources = {
            "SmolLM2 (shipped)": SHIPPED,
            "mock, 21 exchanges": mock_cassette(tmp),
            "demo (simulator)": demo_cassette(tmp),
        }
        repair_table(sources, places, tmp)
        if not args.frames:
            return
        loaded = {name: raw_records(path) for name, path in sources.items()}
        for name, path in sources.items():
            head, records = loaded[name]
            reader = CassetteReader(path)
            traffic = sum(traffic_bytes(r) for r in reader)
            raw = sum(map(len, records))
            level = level_for(raw) or 3
            original = keys_of(path, tmp)
            assert original is not None
            others = [r for other, (_, recs) in loaded.items() if other != name for r in samples(recs)]
            dicts = {n: zstandard.train_dictionary(n, others, level=level) for n in DICT_BYTES}
            print(
                f"\n{name}: {len(original)} exchanges, {len({k for k, _ in original.values()})} results, "
                f"{traffic / 1024:.0f} KiB traffic, file today {path.stat().st_size / 1024:.1f} KiB "
                f"({traffic / path.stat().st_size:.1f}x), close level {level}"
            )
            print(
                f"  {'records/frame':>13} {'ratio':>7} "
                + " ".join(f"{'dict ' + str(n >> 10) + 'K':>9}" for n in DICT_BYTES)
                + "   exchanges lost/flip (p50 p90 max)   results lost/flip (p50 p90 max)"
            )
            for per in FRAME_RECORDS:
                body = b"".join(layout(records, per, level, None))
                data = head + body
                ratios = []
                for n in DICT_BYTES:
                    with_dict = head + b"".join(layout(records, per, level, dicts[n]))
                    ratios.append(f"{traffic / len(with_dict):8.1f}x")
                ex, res = damage_sweep(data, original, places, tmp)
                label = "4 MiB (today)" if per is None else str(per)
                print(
                    f"  {label:>13} {traffic / len(data):6.1f}x {' '.join(ratios)}   "
                    f"{stats(ex)}                  {stats(res)}"
                )


if __name__ == "__main__":
    main()
