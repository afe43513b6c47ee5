"""The `bench` command line.

Each command lives in its own module, which exposes `register(subparsers)`; this file only knows the ordered list
of those modules. Heavy imports (aiohttp, the scorer) happen inside each command's handler so that `bench --help`
stays fast and the scorer's commands never pull in aiohttp.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from bench import __version__
from bench.errors import BenchError

# Order is the order of `bench --help`.
COMMAND_MODULES: tuple[str, ...] = (
    "proxy.command",
    "bench.cassette.command",
    "catalog.command",
    "catalog.record_command",
    "catalog.sim_command",
    "catalog.demo_command",
    "scorer.command",
    "scorer.report_command",
    "bench.view.command",
)

Handler = Callable[[argparse.Namespace], int | None]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench", description="Record LLM gateway traffic once, re-score it forever.")
    parser.add_argument("--version", action="version", version=f"bench {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return handler(args) or 0
    except BenchError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
