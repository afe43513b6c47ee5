"""The `bench` command line.

Each command lives in its own module named after it, which exposes `register(subparsers)`; this file only knows the
ordered list of those modules. They are light to import: heavy imports (aiohttp, the scorer) happen inside each
command's handler so that `bench --help` stays fast and the scorer's commands never pull in aiohttp.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from types import ModuleType

from bench import __version__
from bench.cli import (
    cache_command,
    cassette_command,
    catalog_command,
    demo_command,
    doctor_command,
    export_command,
    init_command,
    load_command,
    proxy_command,
    record_command,
    report_command,
    rescore_command,
    runs_command,
    sim_command,
    view_command,
)
from bench.core.close_level import close_level_setting
from bench.core.errors import BenchError

# Order is the order of `bench --help`.
COMMAND_MODULES: tuple[ModuleType, ...] = (
    init_command,
    proxy_command,
    cassette_command,
    catalog_command,
    record_command,
    runs_command,
    load_command,
    doctor_command,
    sim_command,
    demo_command,
    rescore_command,
    cache_command,
    report_command,
    export_command,
    view_command,
)

Handler = Callable[[argparse.Namespace], int | None]


# Each command's own parser by name, as the last build_parser() made them.
_commands: dict[str, argparse.ArgumentParser] = {}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench", description="Record LLM gateway traffic once, re-score it forever.")
    parser.add_argument("--version", action="version", version=f"bench {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.register(subparsers)
    _commands.clear()
    _commands.update(subparsers.choices)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        # Said by the command's own parser (its usage), not by bench's: `bench report --bogus` is report's mistake.
        command = _commands.get(str(getattr(args, "command", ""))) or parser
        command.error(f"unrecognized arguments: {' '.join(extra)}")
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        close_level_setting()  # refused before any work, not when a cassette closes
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
