"""`bench proxy`: its flags, checked and handed to bench.proxy.standalone, which runs the proxy
until SIGINT/SIGTERM and closes the cassette cleanly."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from bench.core.errors import BenchError
from bench.core.spool import spool_folder
from bench.core.storage import is_url, location
from bench.proxy.modes import MODES


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    p = subparsers.add_parser(
        "proxy",
        help="run the recording reverse proxy for OpenAI-compatible APIs",
        description=(
            "Forward every request to --upstream and record each exchange into a cassette in --cassettes; or serve "
            "recorded exchanges (--mode replay). Point clients at http://HOST:PORT/v1 as their base URL."
        ),
    )
    _where(p)
    _keys(p)
    _limits(p)
    _never_recorded(p)
    _matching(p)
    _rotation(p)
    p.set_defaults(handler=run)


def _where(p: argparse.ArgumentParser) -> None:
    """Where it listens, forwards and records, and how it answers."""
    p.add_argument("--upstream", help="base URL of the OpenAI-compatible server, e.g. http://127.0.0.1:8000")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port to listen on, 0 for any free one (default: 8080)")
    p.add_argument(
        "--cassettes",
        type=location,
        default=Path("cassettes"),
        help="cassette folder (default: ./cassettes), or an object-storage prefix such as s3://bucket/runs: written "
        "in --spool first, uploaded and verified when closed (docs/scale.md)",
    )
    p.add_argument(
        "--spool",
        type=Path,
        default=None,
        metavar="DIR",
        help="with --cassettes URL: where bench's spool folder for that URL is made (default: bench's cache, "
        "~/.cache/bench/spool); only what bench wrote there is uploaded",
    )
    p.add_argument("--mode", choices=list(MODES), default="record", help="default: record")
    p.add_argument(
        "--pace", default="realtime", help="replay pace: realtime (default), instant, or xN (x2 = twice as fast)"
    )
    p.add_argument(
        "--workers",
        default="1",
        metavar="N",
        help="processes serving the port, each recording its own shard of one run (default: 1; auto: one per core); "
        'more than one is for load past one core\'s (docs/proxy.md, "Workers")',
    )


def _keys(p: argparse.ArgumentParser) -> None:
    """The key it sends upstream and the token it asks of clients."""
    p.add_argument(
        "--upstream-key-env",
        metavar="NAME",
        help="send the API key from environment variable NAME upstream instead of the client's Authorization",
    )
    p.add_argument(
        "--token-env", metavar="NAME", help="require clients to send the token from environment variable NAME"
    )


def _limits(p: argparse.ArgumentParser) -> None:
    """How long an upstream or a client may take, and the shutdown's grace."""
    p.add_argument(
        "--request-timeout", type=float, default=None, metavar="S", help="limit on a whole exchange (default: none)"
    )
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="limit on upstream silence, before headers or between reads (default: 300)",
    )
    p.add_argument(
        "--header-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="close a connection whose request head is not complete within S seconds (default: 60; 0: no limit)",
    )
    p.add_argument(
        "--body-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="answer 408 to a request whose body is not complete within S seconds (default: 60; 0: no limit)",
    )
    p.add_argument(
        "--keepalive-timeout",
        type=float,
        default=75.0,
        metavar="S",
        help="close a client connection idle between requests for S seconds (default: 75; 0: no limit)",
    )
    p.add_argument(
        "--grace", type=float, default=10.0, metavar="S", help="on SIGINT/SIGTERM, time left to in-flight exchanges"
    )


def _never_recorded(p: argparse.ArgumentParser) -> None:
    """What it never records, besides the defaults (docs/proxy.md, "Secrets")."""
    p.add_argument(
        "--secret-header", action="append", default=[], metavar="NAME", help="another header never to record"
    )
    p.add_argument(
        "--secret-field", action="append", default=[], metavar="NAME", help="a JSON body field never to record"
    )


def _matching(p: argparse.ArgumentParser) -> None:
    """How replay and auto match a request to a recording."""
    p.add_argument(
        "--match-ignore",
        action="append",
        default=[],
        metavar="JSONPATH",
        help="replay/auto: ignore this JSON body field when matching (dotted, * for any: metadata, input.*.id)",
    )
    p.add_argument(
        "--match-tool-call-ids",
        action="store_true",
        help="replay/auto: renumber tool-call ids in order of appearance before matching",
    )
    p.add_argument(
        "--match-blank",
        action="append",
        default=[],
        metavar="REGEX",
        help="replay/auto: remove matches of REGEX from message text before matching (e.g. timestamps)",
    )


def _rotation(p: argparse.ArgumentParser) -> None:
    """When a long-running proxy closes its cassette and opens the next."""
    p.add_argument(
        "--rotate-size",
        metavar="SIZE",
        help="close the cassette and open the next once SIZE is written (500MB, 1GiB); each is uploaded when closed",
    )
    p.add_argument(
        "--rotate-every",
        metavar="DURATION",
        help="close the cassette and open the next every DURATION (30s, 10m, 1h, 1d); each is uploaded when closed",
    )


def _env(flag: str, name: str | None) -> str | None:
    if name is None:
        return None
    value = os.environ.get(name)
    if not value:
        raise BenchError(f"{flag} {name}: environment variable {name} is not set or empty; export it first")
    return value


def _workers(text: str) -> int:
    if text.strip().lower() == "auto":
        from bench.proxy.workers import cores

        return cores()
    if not text.strip().isdigit() or not 1 <= int(text) <= 1024:
        raise BenchError(f"--workers {text}: give a number of processes from 1 to 1024, or auto (one per core)")
    return int(text)


def run(args: argparse.Namespace) -> int:
    # Imported here: `bench --help` registers every command and must not load the proxy (or aiohttp).
    from bench.core.cassette import Redactor
    from bench.proxy import standalone, workers
    from bench.proxy.app import ClientLimits
    from bench.proxy.matching import match_options
    from bench.proxy.rotation import parse_duration, parse_size
    from bench.proxy.standalone import ServiceOptions

    upstream_key = _env("--upstream-key-env", args.upstream_key_env)
    client_token = _env("--token-env", args.token_env)
    for flag in ("header_timeout", "body_timeout", "keepalive_timeout"):
        if getattr(args, flag) < 0:
            raise BenchError(f"--{flag.replace('_', '-')} {getattr(args, flag):g}: give seconds, or 0 for no limit")
    rotate_size = parse_size(args.rotate_size) if args.rotate_size is not None else None
    rotate_every = parse_duration(args.rotate_every) if args.rotate_every is not None else None
    if (rotate_size is not None or rotate_every is not None) and args.mode == "passthrough":
        raise BenchError("--rotate-size/--rotate-every: passthrough records nothing to rotate; drop them")
    remote = args.cassettes if is_url(args.cassettes) else None
    limits = ClientLimits(
        header_timeout=args.header_timeout or None,
        keepalive_timeout=args.keepalive_timeout or None,
        body_timeout=args.body_timeout or None,
    )
    options = ServiceOptions(
        upstream=args.upstream,
        # With a URL, bench's own folder for it (never the user's ./cassettes): only what bench wrote there is uploaded.
        cassettes=spool_folder(remote, args.spool) if remote is not None else Path(args.cassettes),
        mode=args.mode,
        remote=remote,
        host=args.host,
        port=args.port,
        pace=args.pace,
        upstream_key=upstream_key,
        client_token=client_token,
        request_timeout=args.request_timeout,
        idle_timeout=args.idle_timeout if args.idle_timeout is not None and args.idle_timeout > 0 else None,
        limits=limits,
        redactor=Redactor.with_extra(headers=args.secret_header, json_fields=args.secret_field),
        match=match_options(args.match_ignore, args.match_tool_call_ids, args.match_blank),
        grace=args.grace,
        rotate_size=rotate_size,
        rotate_every=rotate_every,
        workers=_workers(args.workers),
    )
    return (workers.run if options.workers > 1 else standalone.run)(options)
