"""Memory and start-up time of `bench proxy --mode replay`'s index against holding every record unpacked.

Loads the shipped SmolLM2 cassette (or the cassettes under PATH) both ways, side by side in one run, and prints the
Python heap each holds (tracemalloc), the load time, and what a hit costs to unpack.

    .venv/bin/python benchmarks/replay_memory.py [PATH]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.core.cassette import CassetteReader, find_cassettes  # noqa: E402
from bench.proxy.recordings import ReplayIndex, replayable  # noqa: E402


def held(load: Any) -> tuple[Any, int, float]:
    """What `load()` returns, the heap it holds afterwards, and the seconds it took."""
    gc.collect()
    tracemalloc.start()
    t = time.perf_counter()
    value = load()
    took = time.perf_counter() - t
    size = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return value, size, took


def unpacked(folder: Path) -> list[dict[str, Any]]:
    return [r for p in find_cassettes([folder]) for r in CassetteReader(p) if replayable(r)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("path", nargs="?", type=Path, default=ROOT / "cassettes")
    args = ap.parse_args()
    records, plain, plain_s = held(lambda: unpacked(args.path))
    del records
    index, compact, index_s = held(lambda: ReplayIndex.load(args.path))
    n = len(index)
    t = time.perf_counter()
    for item in index.all:
        item.record  # noqa: B018 - what a hit costs
    hit_us = (time.perf_counter() - t) / max(n, 1) * 1e6
    print(f"{n} replayable exchanges from {args.path}")
    print(f"records unpacked:  {plain / 2**20:7.1f} MiB held, loaded in {plain_s:.2f} s")
    print(
        f"replay index:      {compact / 2**20:7.1f} MiB held, loaded in {index_s:.2f} s  ({plain / compact:.1f}x less)"
    )
    print(f"a hit unpacks its record in {hit_us:.0f} us")


if __name__ == "__main__":
    main()
