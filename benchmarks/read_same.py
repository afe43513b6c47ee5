"""This tree's cassette reader against another tree's on the same damaged, cut and junk-laden files: every record, the
`problem` line, the counters and the frame walk's events must be the same (a change to how files are read, e.g. for
speed, must not change what is read).

    .venv/bin/python benchmarks/read_same.py --baseline /work/main [--seed 37] [--exchanges 300]

Files: the shipped recording and one of `--exchanges` benchmark exchanges (benchmarks/rescore_speed.py's, several
frames with repair frames), each as written and damaged: single flipped bits (repaired), flips whose repair frame is
broken too, two runs of zeros, cuts anywhere, cuts at and just before repair frames, junk inserted, a block header
changed (with and without its repair frame). Each tree reads every file in a process of its own (its code first on
sys.path) and prints one JSON line per file; the lines are compared.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

READ = r"""
import hashlib, json, sys
sys.path.insert(0, sys.argv[1])
from bench.core.cassette import CassetteReader, frames
from bench.core.cassette.records import encode
from bench.core.errors import CassetteError
assert frames.__file__.startswith(sys.argv[1]), frames.__file__  # that tree's code, not the installed one
for path in sys.argv[2:]:
    row = {"file": path.rsplit("/", 1)[-1]}
    for bodies in (True, False):
        try:
            r = CassetteReader(path, part_bodies=bodies)
            records, digests = hashlib.sha256(), hashlib.sha256()
            for rec in r:
                records.update(encode(rec))
                digests.update(r.digest() or b"-")
            row[str(bodies)] = [records.hexdigest(), digests.hexdigest(), r.problem, r.truncated, r.lost, r.damaged,
                                r.exchanges, r.raw_size, repr(r.header), repr(r.end)]
        except CassetteError as exc:
            row[str(bodies)] = ["error", str(exc)]
    events, data = [], {}
    for ev in frames.walk(frames.open_bytes(path)):
        if isinstance(ev, frames.Data):  # how a frame's data is cut into pieces is free: its bytes are not
            data.setdefault(ev.frame, hashlib.sha256()).update(ev.data)
        else:
            events.append([repr(ev), data.pop(ev.frame).hexdigest() if ev.frame in data else None])
    row["walk"] = events + sorted((k, v.hexdigest()) for k, v in data.items())
    print(json.dumps(row))
"""


def variants(name: str, data: bytes, out: Path, rng: random.Random) -> None:
    from bench.core.cassette import repair
    from bench.core.cassette.format import ZSTD_MAGIC

    n = len(data)
    repairs = [m for m in range(n) if data[m : m + 4] == repair.MAGIC]
    starts = [m for m in range(n) if data[m : m + 4] == ZSTD_MAGIC]

    def write(kind: str, content: bytes | bytearray) -> None:
        (out / f"{name}-{kind}.cassette").write_bytes(content)

    write("orig", data)
    for k in range(40):
        d = bytearray(data)
        d[rng.randrange(n)] ^= 1 << rng.randrange(8)
        write(f"flip{k}", d)
    for k in range(40):
        d = bytearray(data)
        at = rng.randrange(n)
        d[at] ^= 0xFF
        found = d.find(repair.MAGIC, at)
        if found >= 0:
            d[found + 12] ^= 0xFF
        write(f"broken{k}", d)
    for k in range(20):
        d = bytearray(data)
        for _ in range(2):
            at, length = rng.randrange(n), rng.randrange(1, 3000)
            d[at : at + length] = bytes(len(d[at : at + length]))
        write(f"zeros{k}", d)
    for k in range(30):
        write(f"cut{k}", data[: rng.randrange(64, n)])
    for k, at in enumerate(repairs[:6]):
        write(f"cutrep{k}", data[:at])
        write(f"cutrep{k}b", data[: at - 3])
    for k in range(10):
        at = rng.randrange(n)
        write(f"junk{k}", data[:at] + rng.randbytes(rng.randrange(1, 5000)) + data[at:])
    for k in range(6):
        d = bytearray(data)
        start = rng.choice(starts)
        d[start + 6 + rng.randrange(3)] ^= 0x40
        found = d.find(repair.MAGIC, start)
        if found >= 0 and k % 2:
            d[found + 12] ^= 0xFF
        write(f"blockhead{k}", d)


def read(tree: Path, files: list[Path]) -> list[dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-c", READ, str(tree), *map(str, files)], capture_output=True, text=True, check=True
    )
    return [json.loads(line) for line in done.stdout.splitlines()]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", type=Path, required=True, help="the tree to compare with (e.g. /work/main)")
    ap.add_argument("--seed", type=int, default=37)
    ap.add_argument("--exchanges", type=int, default=300)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import rescore_speed

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        built = folder / "built.cassette"
        rescore_speed.build(built, args.exchanges)
        rng = random.Random(args.seed)
        variants("shipped", (ROOT / "cassettes" / "smollm2-135m-catalog.cassette").read_bytes(), folder, rng)
        variants("bench", built.read_bytes(), folder, rng)
        built.unlink()
        files = sorted(folder.glob("*.cassette"))
        mine, theirs = read(ROOT, files), read(args.baseline.resolve(), files)
    differ = [a["file"] for a, b in zip(mine, theirs, strict=True) if a != b]
    problems = sum(1 for row in mine if isinstance(row["True"], list) and row["True"][2])
    print(f"{len(files)} files ({problems} read with a problem line): {len(differ)} read differently")
    for name in differ[:20]:
        print("  differs:", name)
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
