"""Damaged cassettes read back: tracebacks, silent differences, unreported losses (all goal 0), and what is recovered.

    .venv/bin/python benchmarks/cassette_damage.py [--cases 1000] [--seed 1]

Files: the shipped recording (v2, closed: one zstd frame) and a 300-exchange recording written by the real writer
with 64 KiB frames, closed and live (no end record), so that damage meets frame bounds. Damage, drawn from a seeded
generator: one flipped bit, several random bytes, a run of zeros, a cut, junk appended, a spliced copy of another
part of the file. Each damaged file is read by CassetteReader (what every tool reads through): a record returned that
differs from the one written is a silent difference; a file read with fewer records and no `problem` line is an
unreported loss; with the end record intact, records read + `lost` must equal records written.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.core.cassette import CassetteReader, CassetteWriter  # noqa: E402
from bench.core.cassette import compact as compact_module  # noqa: E402
from bench.core.cassette import writer as writer_module  # noqa: E402
from bench.core.cassette.records import Exchange, Request, Response, RunMeta  # noqa: E402
from bench.core.errors import CassetteError  # noqa: E402

SHIPPED = ROOT / "cassettes" / "smollm2-135m-catalog.cassette"


def damage(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    what = rng.choice(["flip", "flip", "flip", "bytes", "zeros", "cut", "junk", "splice"])
    b = bytearray(data)
    if what == "flip":
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
    elif what == "bytes":
        for _ in range(rng.randint(2, 6)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    elif what == "zeros":
        i = rng.randrange(len(b))
        n = min(rng.randint(1, 600), len(b) - i)
        b[i : i + n] = bytes(n)
    elif what == "cut":
        del b[rng.randrange(len(b)) :]
    elif what == "junk":
        b += rng.randbytes(rng.randint(1, 3000))
    else:
        i, j = sorted(rng.randrange(len(b)) for _ in range(2))
        b[i:i] = bytes(b[j : j + rng.randint(1, 400)])
    return bytes(b), what


def written(path: Path, n: int, close: bool) -> None:
    rng = random.Random(n)
    words = b"the quick brown fox jumps over a lazy dog while seven wise owls count stars".split()
    w = CassetteWriter(path, run=RunMeta(id="damage"))
    for i in range(n):
        k = rng.randint(5, 60)
        chunks = [b'data: {"choices":[{"delta":{"content":" %s"}}]}\n\n' % rng.choice(words) for _ in range(k)]
        w.put(
            Exchange(
                id=f"x{i}",
                request=Request(method="POST", path="/v1/chat/completions", body=b"{}"),
                response=Response(status=200, chunks=chunks, chunk_us=[rng.randint(0, 30000) for _ in chunks]),
            )
        )
        while w.stats.records < i + 2:  # one batch per record: many blocks, as a paced recording writes
            time.sleep(0.0005)
    if close:
        w.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=1000, help="damaged files per source file")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        writer_module.SEGMENT_BYTES = compact_module.SEGMENT_BYTES = 64 << 10  # type: ignore[attr-defined]
        closed, live = tmp / "closed.cassette", tmp / "live.cassette"
        written(closed, 300, close=True)
        written(live, 300, close=False)
        print(
            f"{'file':28} {'tried':>6} {'error':>6} {'tracebk':>7} {'silent':>6} {'unrep.':>6} "
            f"{'read whole':>10} {'partial':>7} {'records kept':>12}"
        )
        for name, source in (("shipped (1 frame)", SHIPPED), ("300 ex., 64 KiB frames", closed), ("same, live", live)):
            reader = CassetteReader(source)
            original = {r["id"]: r for r in reader}
            count: Counter[str] = Counter()
            kept = total = 0
            data = source.read_bytes()
            for case in range(args.cases):
                bad = tmp / "bad.cassette"
                damaged, what = damage(data, rng)
                bad.write_bytes(damaged)
                count["tried"] += 1
                try:
                    r = CassetteReader(bad)
                    got: list[dict[str, Any]] = list(r)
                except CassetteError:
                    count["error"] += 1
                    continue
                except Exception:
                    count["traceback"] += 1
                    traceback.print_exc(limit=3)
                    print(f"  case {case}: {what}", file=sys.stderr)
                    continue
                if any(original.get(g.get("id")) != g for g in got) or len({g["id"] for g in got}) != len(got):
                    count["silent"] += 1
                if (r.problem is None and len(got) < len(original)) or (
                    r.end is not None and r.problem is not None and len(got) + r.lost != len(original)
                ):
                    count["unreported"] += 1
                count["whole" if len(got) == len(original) else "partial"] += 1
                kept += len(got)
                total += len(original)
            print(
                f"{name:28} {count['tried']:>6} {count['error']:>6} {count['traceback']:>7} {count['silent']:>6} "
                f"{count['unreported']:>6} {count['whole']:>10} {count['partial']:>7} {kept / max(total, 1):>11.1%}"
            )


if __name__ == "__main__":
    main()
