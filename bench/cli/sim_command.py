"""`bench sim`: serve the simulated OpenAI-compatible gateway (docs/sim.md)."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "sim",
        help="serve a simulated OpenAI-compatible gateway (oracle and flawed models)",
        description="Serve a simulated OpenAI-compatible gateway whose models behave by name (docs/sim.md).",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000; 0 picks a free one)")
    p.add_argument("--ttft-ms", type=float, default=0.0, help="time to first token in ms (default 0: no delay)")
    p.add_argument(
        "--tokens-per-second", type=float, default=0.0, help="streaming speed per request (default 0: no delay)"
    )
    p.add_argument("--api-key", default=None, help="require this key (default: accept any)")
    p.add_argument(
        "--max-concurrency", type=int, default=None, metavar="N", help="answer N requests at once; the rest wait"
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_serve(args))


async def _serve(args: argparse.Namespace) -> int:
    if args.max_concurrency is not None and args.max_concurrency < 1:
        from bench.core.errors import BenchError

        raise BenchError(f"--max-concurrency must be at least 1 (got {args.max_concurrency})")
    from bench.catalog.sim import start_sim
    from bench.catalog.sim.behaviours import BEHAVIOURS

    sim = await start_sim(
        host=args.host,
        port=args.port,
        ttft_ms=args.ttft_ms,
        tokens_per_second=args.tokens_per_second,
        api_key=args.api_key,
        max_concurrency=args.max_concurrency,
    )
    print(f"bench sim: serving {sim.base_url} ({len(sim.sim.index)} catalog tests known)", flush=True)
    print(f"models: {', '.join(sorted(BEHAVIOURS))} (append +429, +500, +truncate, +stall for faults)", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await sim.close()
    return 0
