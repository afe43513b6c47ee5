"""How far one unit of work travels through bench's modules: the hops of one record-mode exchange, or of one rescored
result (issue 29: a map a maintainer can follow).

    .venv/bin/python benchmarks/call_path.py                          # this tree, the record path
    .venv/bin/python benchmarks/call_path.py --tree /work/base --tree .   # before/after, side by side
    .venv/bin/python benchmarks/call_path.py --path rescore --tree /work/base --tree .
    .venv/bin/python benchmarks/call_path.py --show                   # and the path itself, one stay per line

`--path record` runs ONE streamed chat completion (a tiny aiohttp upstream in this script streaming `--chunks` SSE
events, 1 ms apart) through a real `bench proxy` in record mode on loopback, after one untraced warm-up exchange
(imports, connection pools). `--path rescore` rescores ONE result of the shipped cassette
(cassettes/smollm2-135m-catalog.cassette, the exchanges of `--test`, epoch 0, copied into a cassette of their own) with
the catalog loaded beforehand, after an untraced warm-up rescore. The old layout's entry is `scorer.pipeline.rescore`;
the namespace layout's is `bench.scorer.rescore.rescore` (or `bench.scorer.pipeline.rescore` in the trees between).

While the exchange (or the rescore) runs, `sys.setprofile` sees every call and return event of Python functions in the
loop's thread; the ones whose module is bench's (`bench.*`, and in the old layout `proxy.*`, `scorer.*`, `catalog.*`)
make a sequence of module names (a coroutine's resumption is a call, its suspension a return). Printed:
  - modules: the distinct modules in that sequence;
  - hops: how often the module changes from one event to the next;
  - returns: hops into a module the sequence had already left before.
Not counted: the loop-lag monitor's `select` (bench.proxy.lag wraps the loop's selector: it runs once per loop
iteration, whatever the exchange) and the cassette writer's thread (compression and file writes). Modules, hops and
returns depend on the code's structure only: the same tree gives the same figures run after run (the event count moves
by a few: how often the record task yields to the loop depends on time).

Each tree runs in its own process (two trees cannot share one): `--tree DIR` is a source tree with this project's
layout before or after the namespace move (issue 29), imported from DIR ahead of the installed one.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent
SHIPPED = "cassettes/smollm2-135m-catalog.cassette"
# The loop-lag monitor's per-iteration work (see the docstring); its `since`, asked by an exchange, is counted.
LOOP_LEVEL = frozenset({"select", "_roll"})


def namespace_layout(tree: Path) -> bool:
    """True for the layout with one namespace (`bench.proxy`), False for the old one (top-level `proxy`)."""
    return (tree / "bench" / "proxy").is_dir()


class Trace:
    """The module of every call/return event of bench's functions, in order."""

    def __init__(self, prefixes: tuple[str, ...]) -> None:
        self.prefixes = prefixes
        self.modules: list[str] = []

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" and event != "return":
            return
        name = frame.f_globals.get("__name__", "")
        if not isinstance(name, str) or not name.startswith(self.prefixes):
            return
        if name.endswith(".lag") and frame.f_code.co_name in LOOP_LEVEL:
            return
        self.modules.append(name)


def summary(modules: list[str]) -> dict[str, Any]:
    stays: list[list[Any]] = []  # [module, events] for each stretch of events in one module
    for name in modules:
        if stays and stays[-1][0] == name:
            stays[-1][1] += 1
        else:
            stays.append([name, 1])
    seen: set[str] = set()
    returns = 0
    for name, _ in stays:
        if name in seen:
            returns += 1
        seen.add(name)
    return {
        "events": len(modules),
        "modules": len(seen),
        "hops": max(0, len(stays) - 1),
        "returns": returns,
        "stays": stays,
    }


# -- the record path ----------------------------------------------------------------------------------------------


def _sse_events(chunks: int) -> list[bytes]:
    """A chat completion stream: a role-only event, `chunks - 2` content events, a finish event, then [DONE]."""
    base = {"id": "chatcmpl-trace", "object": "chat.completion.chunk", "created": 1, "model": "trace-model"}
    events = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}]
    for i in range(max(0, chunks - 2)):
        events.append({**base, "choices": [{"index": 0, "delta": {"content": f" word{i}"}, "finish_reason": None}]})
    events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events] + [b"data: [DONE]\n\n"]


async def _upstream(chunks: int) -> tuple[Any, str]:
    from aiohttp import web

    events = _sse_events(chunks)

    async def completions(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for event in events:
            await response.write(event)
            await asyncio.sleep(0.001)  # one read per event at the proxy, as a model's stream arrives
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


async def record_path(namespace: bool, chunks: int, prefixes: tuple[str, ...]) -> list[str]:
    import aiohttp

    start_proxy = importlib.import_module("bench.proxy.server" if namespace else "proxy.server").start_proxy
    runner, upstream = await _upstream(chunks)
    body = {"model": "trace-model", "stream": True, "messages": [{"role": "user", "content": "Say hello."}]}
    trace = Trace(prefixes)
    with tempfile.TemporaryDirectory() as tmp:
        proxy = await start_proxy(upstream=upstream, cassettes=Path(tmp), mode="record")
        try:
            async with aiohttp.ClientSession() as client:

                async def one() -> None:
                    async with client.post(f"{proxy.url}/v1/chat/completions", json=body) as response:
                        assert response.status == 200, response.status
                        await response.read()
                    # The handler ends its exchange after the client's last read: wait for that (bounded).
                    for _ in range(10_000):
                        if not proxy.in_flight:
                            break
                        await asyncio.sleep(0)
                    for _ in range(20):
                        await asyncio.sleep(0)

                await one()  # warm-up: imports, pools, first-use caches
                sys.setprofile(trace)
                try:
                    await one()
                finally:
                    sys.setprofile(None)
        finally:
            await proxy.close()
            await runner.cleanup()
    return trace.modules


# -- the rescore path ---------------------------------------------------------------------------------------------


def _one_result_cassette(namespace: bool, tree: Path, test: str, folder: Path) -> Path:
    cassette = importlib.import_module("bench.core.cassette" if namespace else "bench.cassette")
    header, exchanges = cassette.read_cassette(tree / SHIPPED)
    chosen = [x for x in exchanges if x.tags.get("test") == test and x.tags.get("epoch") == "0"]
    if not chosen:
        raise SystemExit(f"call_path: no exchange of test {test!r} (epoch 0) in {SHIPPED}")
    path = folder / "one.cassette"
    writer = cassette.CassetteWriter(path, settings=header.settings, run=header.run)
    for record in chosen:
        writer.put(record)
    writer.close()
    return path


IN_MEMORY = "--in-memory" in sys.argv


def _rescorer(namespace: bool) -> Any:
    """A function (cassette, out) -> None that rescores a cassette the way `bench rescore` of the tree does: the old
    layout's streaming path (scorer.merge.rescore_to_file; `--in-memory`: its in-memory pipeline, which report, view
    and demo used), or the one path."""
    if not namespace:
        catalog = importlib.import_module("catalog.model").load_catalog(None)
        pipeline = importlib.import_module("scorer.pipeline")
        if IN_MEMORY:
            return lambda path, out: pipeline.rescore([path], catalog=catalog, jobs=1)
        merge = importlib.import_module("scorer.merge")
        return lambda path, out: merge.rescore_to_file([path], out, catalog=catalog, jobs=1)
    try:
        loader = importlib.import_module("bench.scorer.checked_catalog").load_catalog
    except ImportError:
        loader = importlib.import_module("bench.catalog.model").load_catalog
    catalog = loader(None)
    try:
        streaming = importlib.import_module("bench.scorer.rescore")
    except ImportError:
        pipeline = importlib.import_module("bench.scorer.pipeline")
        return lambda path, out: pipeline.rescore([path], catalog=catalog, jobs=1)
    return lambda path, out: streaming.rescore(streaming.Request(paths=[path], catalog=catalog, jobs=1), out)


def rescore_path(namespace: bool, tree: Path, test: str, prefixes: tuple[str, ...]) -> list[str]:
    trace = Trace(prefixes)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = _one_result_cassette(namespace, tree, test, folder)
        rescore = _rescorer(namespace)
        rescore(path, folder / "warm.scores.jsonl")  # warm-up: imports, first-use caches
        sys.setprofile(trace)
        try:
            rescore(path, folder / "traced.scores.jsonl")
        finally:
            sys.setprofile(None)
    return trace.modules


# -- one tree in this process, or several side by side -------------------------------------------------------------


def measure_here(tree: Path, path: str, chunks: int, test: str) -> dict[str, Any]:
    sys.path.insert(0, str(tree))
    namespace = namespace_layout(tree)
    prefixes = ("bench.",) if namespace else ("bench.", "proxy.", "scorer.", "catalog.")
    if path == "record":
        modules = asyncio.run(record_path(namespace, chunks, prefixes))
    else:
        modules = rescore_path(namespace, tree, test, prefixes)
    loaded = importlib.import_module("bench").__file__
    if loaded is None or not Path(loaded).resolve().is_relative_to(tree):
        raise SystemExit(f"call_path: bench was imported from {loaded}, not from {tree}")
    return {"tree": str(tree), "layout": "namespace" if namespace else "old", **summary(modules)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", type=Path, help="source tree to measure (repeat; default: this one)")
    parser.add_argument("--path", choices=("record", "rescore"), default="record")
    parser.add_argument("--chunks", type=int, default=20, help="record: SSE events the upstream streams (default 20)")
    parser.add_argument("--test", default="math.apples", help="rescore: the shipped cassette's test to rescore")
    parser.add_argument(
        "--in-memory", action="store_true", help="rescore, old layout: its in-memory pipeline, not `bench rescore`'s"
    )
    parser.add_argument("--show", action="store_true", help="print each tree's path: one line per stay in a module")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)  # internal: measure this tree in this process
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(measure_here(args.one.resolve(), args.path, args.chunks, args.test)))
        return 0
    rows = []
    for tree in args.tree or [ROOT]:
        argv = [sys.executable, str(HERE), "--one", str(tree), "--path", args.path, "--chunks", str(args.chunks)]
        argv += ["--in-memory"] if args.in_memory else []
        done = subprocess.run([*argv, "--test", args.test], capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            print(done.stdout + done.stderr, file=sys.stderr)
            return 1
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    if args.json:
        print(json.dumps([{k: v for k, v in r.items() if k != "stays"} for r in rows], indent=1))
    else:
        what = (
            f"one streamed chat completion ({args.chunks} SSE events), record mode"
            if args.path == "record"
            else (f"one rescored result ({args.test}, epoch 0, of {SHIPPED})")
        )
        print(f"{what}: call/return events in bench's modules")
        print(f"{'tree':40} {'layout':10} {'events':>7} {'modules':>8} {'hops':>6} {'returns':>8}")
        for r in rows:
            figures = f"{r['events']:>7} {r['modules']:>8} {r['hops']:>6} {r['returns']:>8}"
            print(f"{r['tree']:40} {r['layout']:10} {figures}")
    if args.show:
        for r in rows:
            print(f"\n{r['tree']}:")
            for name, events in r["stays"]:
                print(f"  {name} ({events})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
