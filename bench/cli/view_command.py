"""`bench view PATH...`: serve a local web app over cassettes and scores (docs/view.md)."""

from __future__ import annotations

import argparse
import ipaddress
import os
from pathlib import Path
from typing import Any

from bench.core.errors import BenchError
from bench.core.storage import location


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "view",
        help="browse runs, results, conversations and stream timelines in a local web app",
        description="Serve a local web app over scores files and cassettes: runs, results (filtered, sorted, paged), "
        "one result's conversation, checks and stream timeline, and two runs compared.",
    )
    p.add_argument(
        "paths",
        nargs="*",
        type=location,
        metavar="PATH",
        help="scores file, cassette, folder of them, or cassettes at an object-storage URL (s3://bucket/prefix)",
    )
    p.add_argument(
        "--follow",
        type=Path,
        metavar="DIR",
        help="show the exchanges of the cassettes under DIR as they are recorded (a running bench proxy or bench "
        "record writing there); read-only",
    )
    p.add_argument(
        "--prices", type=Path, metavar="FILE", help="price table (YAML, per million tokens): each model call's cost"
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port (default: a free one, printed)")
    p.add_argument(
        "--token-env", metavar="NAME", help="require the token in environment variable NAME (needed off loopback)"
    )
    p.add_argument("--no-open", action="store_true", help="do not open a browser")
    p.set_defaults(handler=run)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def token_for(host: str, token_env: str | None) -> str | None:
    """The token the server requires; a host other than loopback without one is refused."""
    if token_env is not None:
        value = os.environ.get(token_env)
        if not value:
            raise BenchError(f"--token-env {token_env}: environment variable {token_env} is not set or empty")
        return value
    if not is_loopback(host):
        raise BenchError(
            f"--host {host} is reachable from other machines: give --token-env NAME with a secret in $NAME"
        )
    return None


def answered_hosts(host: str) -> frozenset[str] | None:
    """Bound to loopback: loopback names and the bound address only (against DNS rebinding). Bound beyond it, a token
    is required and any name the machine is reached by is answered."""
    if not is_loopback(host):
        return None
    from bench.view.web_app import LOOPBACK_NAMES, host_name

    return LOOPBACK_NAMES | {host_name(host)}


def run(args: argparse.Namespace) -> int:
    if not args.paths and args.follow is None:
        raise BenchError("bench view: give PATH (scores, cassettes) or --follow DIR (a recording in progress), or both")
    if args.follow is not None and not args.follow.is_dir():
        raise BenchError(f"--follow {args.follow}: not a folder; give the folder bench proxy or bench record writes to")
    token = token_for(args.host, args.token_env)
    from aiohttp import web

    from bench.core.serving import reserve
    from bench.scorer import progress
    from bench.view.index import open_index
    from bench.view.web_app import make_app

    # Bound before the load: a busy or impossible port is one line at once, not a traceback after it.
    sock = reserve(args.host, args.port)
    try:
        prices = None
        if args.prices is not None:
            from bench.scorer.report.cost import load_prices

            prices = load_prices(args.prices)
        with progress.shown("bench view"):
            index = open_index(args.paths, allow_empty=args.follow is not None)
        index.prices = prices
    except BaseException:
        sock.close()
        raise
    index.warm_in_background()
    live = None
    if args.follow is not None:
        from bench.view.live import Live

        live = Live(args.follow)
    app = make_app(index, token, answered_hosts(args.host), live)
    print(f"{len(index.rows)} result(s) in {len(index.runs)} run(s)", flush=True)
    if live is not None:
        print(f"following {args.follow}: its cassettes' exchanges as they are recorded (#/live)", flush=True)

    import asyncio

    async def serve() -> None:
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.SockSite(runner, sock)
        await site.start()
        port = runner.addresses[0][1]
        shown = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
        url = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")
        url += "#/live" if live is not None and not args.paths else ""  # only following: the live page first
        # The URL carries the token only when the user chose one; it is theirs to see.
        print(f"bench view: {url}  (Ctrl-C stops)", flush=True)
        if not args.no_open:
            import webbrowser

            webbrowser.open(url)
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    asyncio.run(serve())
    return 0
