"""`bench proxy`: parse the flags, run the proxy until SIGINT/SIGTERM, close the cassette cleanly."""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import signal
import sys
from pathlib import Path
from typing import Any

from bench.core.errors import BenchError
from bench.core.spool import fetch_all, spool_folder, upload_leftovers
from bench.core.storage import is_url, location, upload
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
        "--upstream-key-env",
        metavar="NAME",
        help="send the API key from environment variable NAME upstream instead of the client's Authorization",
    )
    p.add_argument(
        "--token-env", metavar="NAME", help="require clients to send the token from environment variable NAME"
    )
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
    p.add_argument(
        "--secret-header", action="append", default=[], metavar="NAME", help="another header never to record"
    )
    p.add_argument(
        "--secret-field", action="append", default=[], metavar="NAME", help="a JSON body field never to record"
    )
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
    p.set_defaults(handler=run)


def _env(flag: str, name: str | None) -> str | None:
    if name is None:
        return None
    value = os.environ.get(name)
    if not value:
        raise BenchError(f"{flag} {name}: environment variable {name} is not set or empty; export it first")
    return value


def run(args: argparse.Namespace) -> int:
    upstream_key = _env("--upstream-key-env", args.upstream_key_env)
    client_token = _env("--token-env", args.token_env)
    if args.idle_timeout is not None and args.idle_timeout <= 0:
        args.idle_timeout = None
    for flag in ("header_timeout", "body_timeout", "keepalive_timeout"):
        if getattr(args, flag) < 0:
            raise BenchError(f"--{flag.replace('_', '-')} {getattr(args, flag):g}: give seconds, or 0 for no limit")
    from bench.proxy.rotation import parse_duration, parse_size

    args.rotate_size = parse_size(args.rotate_size) if args.rotate_size is not None else None
    args.rotate_every = parse_duration(args.rotate_every) if args.rotate_every is not None else None
    rotating = args.rotate_size is not None or args.rotate_every is not None
    if rotating and args.mode == "passthrough":
        raise BenchError("--rotate-size/--rotate-every: passthrough records nothing to rotate; drop them")
    remote: str | None = None
    if is_url(args.cassettes):
        # bench's own folder for this URL (never the user's ./cassettes): only what bench wrote there is uploaded.
        remote, args.cassettes = args.cassettes, spool_folder(args.cassettes, args.spool)
        args.spool = args.cassettes
        if MODES[args.mode].records:
            # Cassettes a killed proxy closed but did not upload go first, verified, before new ones are written.
            for line in upload_leftovers(args.spool, remote):
                print(line, flush=True)
        if MODES[args.mode].replays:
            # Replay needs the recordings at hand: fetched into the spool (written locally, like any cassette).
            fetch_all(remote, args.spool)
    lost = asyncio.run(_serve(args, upstream_key, client_token, remote))
    return 1 if lost else 0


async def _serve(
    args: argparse.Namespace, upstream_key: str | None, client_token: str | None, remote: str | None = None
) -> int:
    """Run until stopped; returns how many exchanges were forwarded but not recorded (the cassette file failed)."""
    from bench.core.cassette import Redactor
    from bench.proxy.app import ClientLimits
    from bench.proxy.matching import match_options
    from bench.proxy.server import public_url, start_proxy

    redactor = Redactor.with_extra(headers=args.secret_header, json_fields=args.secret_field)
    match = match_options(args.match_ignore, args.match_tool_call_ids, args.match_blank)
    first: Path | None = None
    if (args.rotate_size is not None or args.rotate_every is not None) and MODES[args.mode].records:
        from bench.core.cassette import new_cassette_path
        from bench.proxy.rotation import rotation_first_path

        first = rotation_first_path(new_cassette_path(Path(args.cassettes), prefix=MODES[args.mode].cassette_prefix))
    proxy = await start_proxy(
        upstream=args.upstream,
        cassettes=args.cassettes,
        mode=args.mode,
        host=args.host,
        port=args.port,
        pace=args.pace,
        upstream_key=upstream_key,
        client_token=client_token,
        request_timeout=args.request_timeout,
        idle_timeout=args.idle_timeout,
        redactor=redactor,
        limits=ClientLimits(
            header_timeout=args.header_timeout or None,
            keepalive_timeout=args.keepalive_timeout or None,
            body_timeout=args.body_timeout or None,
        ),
        match=match,
        cassette=first,
    )
    # What is loaded by now lives as long as the process: frozen, it is out of the collector's sight, and a full
    # collection scans only what the exchanges allocated instead of ~36k startup objects as well (a ~20-30 ms stall
    # of the forwarding loop each time, measured under the 256-stream benchmark).
    gc.freeze()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(signame: str) -> None:
        if stop.is_set():
            print(f"bench proxy: {signame} again: cutting in-flight exchanges now", file=sys.stderr, flush=True)
            proxy.hurry()
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig.name)
    rotator = None
    upload_failures = 0
    if (args.rotate_size is not None or args.rotate_every is not None) and proxy.cassette_path is not None:
        from bench.proxy.rotation import Rotator

        async def closed(path: Path) -> None:
            nonlocal upload_failures
            if remote is None:
                print(f"bench proxy: closed {path}", flush=True)
                return
            try:
                url = await asyncio.to_thread(upload, path, remote)
            except BenchError as exc:
                upload_failures += 1
                print(f"bench proxy: error: {exc}", file=sys.stderr, flush=True)
                return
            print(f"bench proxy: closed {path}, uploaded {url} (size and sha256 verified)", flush=True)

        rotator = Rotator(proxy, size=args.rotate_size, every=args.rotate_every, on_closed=closed)
        rotator.start()
    print(f"bench proxy: listening on {proxy.url} (clients: base URL {proxy.url}/v1)", flush=True)
    # The label, not the flag: an upstream URL given with user:password@ or ?key= must not be printed with them.
    shown = public_url(args.upstream)[1] if args.upstream else "(none: replay only)"
    print(f"bench proxy: upstream {shown}, mode {args.mode}", flush=True)
    if proxy.cassette_path is not None:
        then = f" (uploaded to {remote} when closed)" if remote else ""
        print(f"bench proxy: writing {proxy.cassette_path}{then}", flush=True)
    else:
        print("bench proxy: passthrough, recording nothing", flush=True)
    try:
        await stop.wait()
        if proxy.in_flight:
            print(
                f"bench proxy: stopping; {proxy.in_flight} exchange(s) in flight get up to {args.grace:g} s",
                file=sys.stderr,
                flush=True,
            )
    finally:
        if rotator is not None:
            await rotator.stop()
        await proxy.close(interrupted=True, grace=args.grace)
    s = proxy.stats
    where = f" to {proxy.cassette_path}" if proxy.cassette_path else ""
    refused = ""
    if s.bad_requests or s.slow_clients:
        refused = f", {s.bad_requests} bad request(s) refused, {s.slow_clients} slow connection(s) closed"
    print(
        f"bench proxy: stopped; {s.exchanges} exchange(s) recorded{where}, {s.errors} upstream error(s){refused}",
        flush=True,
    )
    if s.lost:
        why = proxy.recording_failure or "the cassette writer failed"
        print(
            f"bench proxy: error: {s.lost} exchange(s) forwarded but NOT recorded ({why})", file=sys.stderr, flush=True
        )
    if remote is not None and proxy.cassette_path is not None and proxy.cassette_path.exists():
        # The local copy is removed only once the object is verified; a failed upload leaves it for a later try.
        try:
            url = await asyncio.to_thread(upload, proxy.cassette_path, remote)
        except BenchError as exc:
            print(f"bench proxy: error: {exc}", file=sys.stderr, flush=True)
            return s.lost or 1
        print(f"bench proxy: uploaded {url} (size and sha256 verified), removed the local copy", flush=True)
    if upload_failures:
        return s.lost or 1
    return s.lost
