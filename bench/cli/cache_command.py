"""`bench cache`: where the parse cache is, how large, and emptying it (bench.scorer.parse_cache)."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "cache",
        help="show or empty the parse cache that makes a second rescore fast",
        description="The parse cache keeps every rescored exchange's parse; removing it only makes the next "
        "rescore parse again.",
    )
    p.add_argument("action", choices=("info", "clear"), help="info: where and how large; clear: remove its files")
    p.add_argument(
        "--parse-cache", metavar="DIR", help="the cache folder (default: $BENCH_PARSE_CACHE, else ~/.cache/bench)"
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from bench.core.errors import BenchError
    from bench.scorer import parse_cache

    folder = parse_cache.configured(args.parse_cache)
    if folder is None:
        raise BenchError(f"the parse cache is off ({parse_cache.ENV}); name a folder with --parse-cache DIR")
    if args.action == "clear":
        freed = parse_cache.clear(folder)
        print(f"parse cache {folder}: removed {freed / 2**20:.1f} MiB")
        return 0
    used = parse_cache.size(folder)
    print(f"parse cache {folder}: {used / 2**20:.1f} MiB of at most {parse_cache.max_bytes() / 2**20:.0f} MiB")
    return 0
