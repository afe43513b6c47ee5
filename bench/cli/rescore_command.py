"""`bench rescore`: score recorded cassettes offline with the catalog as it is now."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from bench.core.storage import is_url, location


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "rescore",
        help="score recorded cassettes offline with the current catalog and evaluators",
        description="Re-parse every recorded exchange and score it with the catalog as it is now; no network.",
    )
    p.add_argument(
        "paths",
        nargs="+",
        type=location,
        metavar="PATH",
        help="cassette files, folders of them, or object-storage URLs (s3://bucket/prefix, docs/scale.md)",
    )
    p.add_argument("--catalog", type=Path, help="catalog folder (default: the built-in catalog)")
    p.add_argument("--suite", action="append", default=[], help="only this suite (repeatable)")
    p.add_argument("--model", action="append", default=[], help="only this model (repeatable)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes (default: all cores)")
    p.add_argument("--out", type=Path, help="scores file (default: scores.jsonl in the first folder given)")
    p.add_argument("--max-tokens", type=int, help="what-if: as if generation had stopped after N tokens")
    p.add_argument(
        "--rules",
        type=Path,
        metavar="FILE",
        help="rules file: score untagged traffic with the evaluators (docs/rules.md)",
    )
    p.add_argument("--deadline", type=float, metavar="SECONDS", help="what-if: as if the client gave up after S s")
    p.add_argument(
        "--dask",
        metavar="SCHEDULER",
        help="run on Dask: a scheduler address (tcp://HOST:8786) or local[:N] for N local workers (docs/scale.md)",
    )
    p.add_argument(
        "--parse-cache",
        metavar="DIR",
        help="keep every exchange's parse in DIR for the next rescore (default: $BENCH_PARSE_CACHE, else "
        "~/.cache/bench; `bench cache clear` empties it)",
    )
    p.add_argument("--no-parse-cache", action="store_true", help="parse every exchange; read and write no cache")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from bench.core.errors import BenchError
    from bench.scorer import parse_cache, progress
    from bench.scorer.checked_catalog import load_catalog
    from bench.scorer.rescore import Request, default_base, rescore
    from bench.scorer.rescore_summary import print_summary

    if args.jobs < 1:
        raise BenchError(f"--jobs {args.jobs}: give at least 1")
    catalog = load_catalog(args.catalog)
    rules: tuple[Any, ...] = ()
    if args.rules is not None:
        from bench.scorer.rules import load_rules

        rules = load_rules(args.rules)
    if args.out is None and is_url(args.paths[0]):
        raise BenchError(f"{args.paths[0]}: cassettes on object storage: give --out FILE for the scores file")
    out: Path = args.out or default_base(args.paths) / "scores.jsonl"
    request = Request(
        list(args.paths),
        catalog=catalog,
        jobs=args.jobs,
        max_tokens=args.max_tokens,
        deadline_s=args.deadline,
        suites=args.suite,
        models=args.model,
        rules=rules,
        dask=args.dask,
        parse_cache=parse_cache.configured(args.parse_cache, off=args.no_parse_cache),
    )
    with progress.shown("bench rescore"):
        written = rescore(request, out, previous=out if out.exists() else None)
    print_summary(Console(), written.meta, written.tally, written.flips, str(out), traffic=written.traffic)
    return 0
