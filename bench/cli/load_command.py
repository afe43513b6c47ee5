"""`bench load`: send a workload through the recording proxy under a chosen load, level by level (docs/load.md)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from bench.core.errors import BenchError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "load",
        help="load test through the recording proxy: rates, concurrencies, sweeps, replayed traffic",
        description="Send a workload through the recording proxy under a chosen load, level by level; every "
        "exchange is recorded with its level, and `bench report` reads each level from the cassette (docs/load.md).",
    )
    p.add_argument("--upstream", required=True, help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000")
    p.add_argument("--model", dest="models", action="append", default=[], help="model to load (repeatable)")
    levels = p.add_argument_group("levels (one of)")
    one = levels.add_mutually_exclusive_group(required=True)
    one.add_argument("--rate", help="open-loop arrivals per second, one level each: 1,2,4")
    one.add_argument("--concurrency", help="requests kept in flight, one level each: 1,4,16")
    one.add_argument("--sweep", type=int, metavar="N", help="N levels: synchronous, throughput, then rates between")
    one.add_argument("--synchronous", action="store_true", help="one request at a time")
    one.add_argument("--throughput", action="store_true", help="as many in flight as --throughput-concurrency")
    one.add_argument(
        "--replay-traffic", nargs="+", metavar="CASSETTES", help="resend recorded requests on their recorded schedule"
    )
    p.add_argument("--speed", type=float, default=1.0, help="--replay-traffic: time scale (2: twice as fast)")
    p.add_argument("--arrival", choices=("constant", "poisson", "gamma"), default="poisson", help="rate levels")
    p.add_argument("--burstiness", type=float, default=1.0, help="gamma arrivals' shape (1: Poisson, < 1: burstier)")
    p.add_argument("--max-concurrency", type=int, help="at most this many in flight (arrivals wait for a slot)")
    p.add_argument("--throughput-concurrency", type=int, default=64, help="in flight at the throughput level")
    length = p.add_mutually_exclusive_group()
    length.add_argument("--duration", type=float, metavar="S", help="seconds per level")
    length.add_argument("--requests", type=int, metavar="N", help="requests per level")
    p.add_argument("--warmup", help="left out at each level's start: a share (10%%) or seconds (2s)")
    p.add_argument("--cooldown", help="left out at each level's end: a share (10%%) or seconds (2s)")
    p.add_argument("--drain", type=float, default=60.0, metavar="S", help="wait for answers after a level (60)")
    work = p.add_argument_group("workload (default: the catalog)")
    what = work.add_mutually_exclusive_group()
    what.add_argument("--synthetic", metavar="SPEC", help='synthetic prompts: "input=256,output=128" (docs/load.md)')
    what.add_argument("--dataset", type=Path, metavar="FILE", help="JSONL: request bodies, prompts or ShareGPT")
    work.add_argument("--tokenizer", metavar="GGUF", help="--synthetic: exact token counts with this model's tokenizer")
    work.add_argument("--ignore-eos", action="store_true", help="--synthetic: ask for exactly the output length")
    work.add_argument("--suite", dest="suites", action="append", default=[], help="catalog: only this suite")
    work.add_argument("--tests", help="catalog: only these test ids, comma-separated")
    work.add_argument("--catalog", type=Path, help="catalog folder (default: the built-in catalog)")
    p.add_argument("--no-stream", dest="stream", action="store_false", help="ask for whole answers, not streams")
    p.add_argument("--slo", nargs="+", metavar="METRIC:MS", help="the report's default SLO: ttft:200 tpot:50 e2el:5000")
    p.add_argument("--request-timeout", type=float, default=600.0, metavar="S", help="per request (600)")
    p.add_argument("--seed", type=int, default=0, help="arrivals and sampling are reproducible from it")
    p.add_argument("--out", default="cassettes", help="folder for the cassette (default ./cassettes)")
    p.set_defaults(handler=run_load_command)


def _positive(name: str, value: float | None) -> None:
    if value is not None and not value > 0:
        raise BenchError(f"--{name} must be above 0 (got {value:g})")


def _levels(args: argparse.Namespace) -> tuple[str, list[float]]:
    from bench.catalog.loadgen.levels import parse_values

    if args.rate:
        return "rate", parse_values(args.rate, "--rate")
    if args.concurrency:
        return "concurrency", parse_values(args.concurrency, "--concurrency", integer=True)
    if args.sweep is not None:
        if args.sweep < 3:
            raise BenchError(f"--sweep {args.sweep}: a sweep has at least 3 levels (synchronous, throughput, a rate)")
        return "sweep", [float(args.sweep)]
    if args.replay_traffic:
        _positive("speed", args.speed)
        return "replay", [args.speed]
    return ("synchronous", []) if args.synchronous else ("throughput", [])


def _workload(args: argparse.Namespace) -> tuple[str, str | None]:
    if args.replay_traffic:
        return "replay", "\n".join(args.replay_traffic)
    if args.synthetic is not None:
        return "synthetic", args.synthetic
    if args.dataset is not None:
        return "dataset", str(args.dataset)
    return "catalog", None


def run_load_command(args: argparse.Namespace) -> int:
    from bench.catalog.loadgen.levels import Bounds, parse_span
    from bench.catalog.loadgen.load_run import LoadConfig, run_load
    from bench.catalog.loadgen.sources import source
    from bench.catalog.loadgen.work import SourceOptions
    from bench.scorer.report.slo import parse_slo

    for name in ("duration", "max_concurrency", "throughput_concurrency", "drain", "request_timeout", "burstiness"):
        _positive(name.replace("_", "-"), getattr(args, name))
    if args.requests is not None and args.requests < 1:
        raise BenchError(f"--requests must be at least 1 (got {args.requests})")
    kind, values = _levels(args)
    workload, arg = _workload(args)
    bounds = Bounds(
        args.duration, args.requests, parse_span(args.warmup, "--warmup"), parse_span(args.cooldown, "--cooldown")
    )
    if kind != "replay":
        bounds.check()
    catalog = None
    if workload == "catalog":
        from bench.scorer.checked_catalog import load_catalog

        catalog = load_catalog(args.catalog)
    tests = tuple(t.strip() for t in args.tests.split(",") if t.strip()) if args.tests else ()
    options = SourceOptions(
        arg=arg, models=tuple(args.models), stream=args.stream, seed=args.seed, catalog=catalog,
        suites=tuple(args.suites), tests=tests, tokenizer=args.tokenizer,
        extra={"ignore_eos": "1"} if args.ignore_eos else {},
    )  # fmt: skip
    work = iter(source(workload).build(options))
    cfg = LoadConfig(
        upstream=args.upstream, models=list(args.models), levels=kind, values=values,
        api_key=os.environ.get("BENCH_API_KEY"), workload=workload, source=arg.replace("\n", " ") if arg else None,
        arrival=args.arrival, burstiness=args.burstiness, max_concurrency=args.max_concurrency,
        throughput_concurrency=args.throughput_concurrency, bounds=bounds, drain_s=args.drain,
        request_timeout=args.request_timeout, out=args.out, seed=args.seed, stream=args.stream,
        slo=parse_slo(args.slo or []),
    )  # fmt: skip
    summary = asyncio.run(run_load(cfg, work, catalog=catalog, handle_signals=True))
    print(f"run {summary.run_id}: {len(summary.levels)} level(s)")
    if summary.cassette is not None:
        print(f"cassette: {summary.cassette}")
    slo = f" --slo {' '.join(args.slo)}" if args.slo else ""
    print(f"next: bench rescore {cfg.out} && bench report {cfg.out}{slo}")
    if summary.interrupted:
        print("interrupted: the levels run so far are in the cassette", file=sys.stderr)
        return 130
    return 0
