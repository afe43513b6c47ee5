"""`bench demo`: the whole pipeline on a fresh machine, no model needed.

Starts the simulated gateway in-process, records the built-in catalog for the oracle and two flawed models through
the recording proxy, then (when the scorer is installed) rescores the cassette and shows the report.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

DEMO_MODELS = ("oracle", "flawed-no-call", "flawed-invalid-json")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "demo",
        help="record the built-in catalog against the simulator and show the report",
        description="Start the simulated gateway, record the catalog for the oracle and two flawed models through "
        "the proxy, rescore the cassette and show the report.",
    )
    # Not ./cassettes: that folder holds the recordings a clone ships (README's `bench report cassettes/`), and the
    # simulator's models mixed into them would change that report and the tests that read them.
    p.add_argument("--out", type=Path, default=Path("runs/demo"), help="folder for the cassette (default ./runs/demo)")
    p.add_argument("--epochs", type=int, default=1, help="repeats of each test per model (default 1)")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from bench.core.errors import BenchError

    if args.epochs < 1:
        raise BenchError(f"--epochs must be at least 1 (got {args.epochs})")
    summary, cassette = asyncio.run(_record(args))
    print(f"recorded {summary.requests} requests ({summary.retries} retries) in {summary.elapsed:.1f} s")
    print(f"cassette: {cassette}")
    scores = _score(cassette)
    print()
    if scores is not None:
        print(f"scores: {scores}")
    print("next:")
    print(f"  bench cassette show {cassette}           # what was recorded")
    if scores is not None:
        print(f"  bench report {scores} --out report.html   # the report as a web page")
    else:
        print(f"  bench rescore {cassette}                 # score it (once the scorer is installed)")
    print("  bench doctor --upstream URL               # is your gateway ready to record?")
    print("  bench record --upstream URL --model M     # record your own gateway (docs/record.md)")
    return 130 if summary.interrupted else 0


DEMO_TTFT_MS = 15.0
DEMO_TOKENS_PER_SECOND = 400.0


async def _record(args: argparse.Namespace) -> tuple[Any, Path | None]:
    from bench.catalog.driver.config import RecordConfig
    from bench.catalog.driver.progress import make_reporter
    from bench.catalog.driver.record_run import record
    from bench.catalog.sim import start_sim
    from bench.scorer.checked_catalog import load_catalog

    catalog = load_catalog(None)
    # Paced like a fast real server so that the report's timing tables have something to show (a few seconds).
    sim = await start_sim(catalog=catalog, ttft_ms=DEMO_TTFT_MS, tokens_per_second=DEMO_TOKENS_PER_SECOND)
    try:
        cfg = RecordConfig(
            upstream=sim.url, models=list(DEMO_MODELS), epochs=args.epochs, out=str(args.out), temperature=0.0, seed=7
        )
        reporter = make_reporter(args.quiet, cfg.progress_every)
        summary = await record(cfg, catalog, reporter=reporter, handle_signals=True)
    finally:
        await sim.close()
    return summary, summary.cassette


def _score(cassette: Path | None) -> Path | None:
    """Rescore and show the report if the scorer is there; the demo still records without it."""
    if cassette is None:
        return None
    from bench.cli.report_command import run_report
    from bench.scorer.checked_catalog import load_catalog
    from bench.scorer.rescore import Request, rescore

    out = cassette.with_suffix(".scores.jsonl")
    rescore(Request([cassette], catalog=load_catalog(None)), out)
    print()
    run_report(argparse.Namespace(path=out, format="table", out=None, jobs=1))
    return out
