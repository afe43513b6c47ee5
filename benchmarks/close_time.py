"""Closing a cassette that holds a large answer: the recompression at close, before (the whole file at the level
chosen by size: 9 up to 128 MiB) and after (frame by frame, level by size, large files and frames that compress
under 3x kept as written), side by side in one run: CPU seconds, wall seconds and the file's size ratio.

A cassette is written here through CassetteWriter (as the proxy does, in parts past 8 MiB) with one answer of
`--mb` MB of text (words, as a model writes) or of random hex, plus 40 short exchanges; then each close policy is
applied to its own copy, in interleaved rounds.

    .venv/bin/python benchmarks/close_time.py [--mb 50] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.core.cassette import CassetteReader, CassetteWriter  # noqa: E402
from bench.core.cassette.compact import compact, replace_atomically, segment_frames  # noqa: E402
from bench.core.cassette.frames import FrameEnd, open_bytes, walk  # noqa: E402
from bench.core.cassette.records import Exchange, Part, Request, Response  # noqa: E402


def answer(mb: int, kind: str) -> bytes:
    rng = random.Random(mb)
    if kind == "hex":
        return rng.randbytes(mb << 19).hex().encode()
    words = b"the quick brown fox jumps over a lazy dog while seven wise owls count stars".split(b" ")
    return b" ".join(rng.choices(words, k=(mb << 20) // 5))[: mb << 20]


def write(path: Path, body: bytes) -> int:
    writer = CassetteWriter(path, compact_on_close=False)
    reads = [body[i : i + (64 << 10)] for i in range(0, len(body), 64 << 10)]
    seqs = []
    per = (8 << 20) // (64 << 10)
    for n, start in enumerate(range(0, len(reads) - per, per)):
        part = Part(started=1, n=n, chunks=reads[start : start + per], chunk_us=[100] * per)
        packed, times = writer.pack_part(part), None
        del times
        writer._enqueue([packed], block=True)
        seqs.append(writer._queued_count)
    rest = reads[len(seqs) * per :]
    for i in range(40):
        small = Exchange(id=f"x{i}", request=Request(method="POST", path="/v1/chat/completions", body=b'{"m":1}'))
        small.response = Response(status=200, chunks=[b'{"choices":[{"text":"hi %d"}]}' % i], chunk_us=[5])
        writer.put(small)
    big = Exchange(id="x40", started=1, request=Request(method="POST", path="/v1/chat/completions"))
    big.response = Response(status=200, chunks=rest, chunk_us=[100] * len(rest), raw_bytes=len(body), parts=seqs)
    writer.put(big)
    return writer.close().raw_bytes


def before(path: Path, raw_bytes: int) -> None:
    """The close as it was: the whole file's records joined and recompressed at the level for its size."""
    level = next((lv for limit, lv in ((8 << 20, 19), (32 << 20, 15), (128 << 20, 9)) if raw_bytes <= limit), None)
    if level is None:
        return
    buf = open_bytes(path)
    head_end = next(e.end for e in walk(buf) if isinstance(e, FrameEnd))
    raw = bytearray()
    for event in walk(buf):
        if event.frame > 0 and hasattr(event, "data"):
            raw += event.data  # type: ignore[union-attr]
    replace_atomically(path, [bytes(buf[:head_end]), *segment_frames(raw, level)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(f"load {os.getloadavg()[0]:.1f}")
    for kind in ("text", "hex"):
        body = answer(args.mb, kind)
        with tempfile.TemporaryDirectory() as tmp:
            live = Path(tmp) / "live.cassette"
            raw_bytes = write(live, body)
            live_size = live.stat().st_size
            got: dict[str, list[tuple[float, float, int]]] = {"before": [], "after": []}
            for _ in range(args.rounds):
                for name in ("before", "after"):
                    copy = Path(tmp) / f"{name}.cassette"
                    shutil.copy(live, copy)
                    cpu, wall = time.process_time(), time.monotonic()
                    if name == "before":
                        before(copy, raw_bytes)
                    else:
                        compact(copy, raw_bytes)
                    got[name].append((time.process_time() - cpu, time.monotonic() - wall, copy.stat().st_size))
                    records = list(CassetteReader(copy))
                    assert b"".join(records[-1].response.chunks) == body, "the answer came back changed"
            mib = raw_bytes / 2**20
            print(f"{args.mb} MB {kind} answer, {mib:.0f} MiB of records, written {raw_bytes / live_size:.2f}x:")
            for name, rows in got.items():
                cpu = statistics.median(r[0] for r in rows)
                wall = statistics.median(r[1] for r in rows)
                print(f"  {name:>6}: close CPU {cpu:.1f} s, wall {wall:.1f} s, ratio {raw_bytes / rows[-1][2]:.2f}x")


if __name__ == "__main__":
    main()
