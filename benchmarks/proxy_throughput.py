"""Saturation throughput of a recording proxy, CPU-accounted (issue 34): how many streamed chunks per second one core
forwards, and what a second worker adds.

    flock /tmp/bench-quiet.lock .venv/bin/python benchmarks/proxy_throughput.py            # ~2 minutes
    flock /tmp/bench-quiet.lock .venv/bin/python benchmarks/proxy_throughput.py --quick    # a smoke run, ~20 s

Side by side in one run, in interleaved rounds with the targets in random order each round, against one mock upstream
(benchmarks/proxy_overhead.py's; unpaced by default: every SSE event written at once, so the upstream is CPU-bound
and the proxy reads several events at a time; `--itl-ms` paces them, each event then a read of its own as from a real
model): a bare aiohttp pass-through on asyncio and on uvloop, `bench proxy --mode record` with one worker on asyncio
and on uvloop (the event loop policy set before bench starts), and with two workers (`--workers 2`). Each round keeps
`--streams` streams in flight for `--seconds` through one target and counts:
  - chunks/s and requests/s delivered (a chunk: one SSE event the upstream wrote; every stream is checked whole);
  - the proxy's CPU (all its processes and threads, from their CPU clocks) per chunk, and chunks per proxy
    CPU-second: the per-core rate, which is what scales with cores when the clients and the upstream are elsewhere.
Ratios are taken within a round (target / bare asyncio, 2 workers / 1 worker), then the median over rounds.

On a 2-core machine the clients, the upstream and the proxy share the two cores, so aggregate chunks/s measures the
whole machine, not the proxy: the per-core rate and the CPU per chunk of 2 workers against 1 are the figures that
carry to a larger machine (model printed at the end). `--mitmdump PATH` adds mitmdump recording (`-w`) as a
reverse proxy (not a dependency: install it in a virtualenv of its own, `pip install mitmproxy`).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import proxy_overhead as po  # the mock upstream, the bare pass-through, process CPU clocks

BARE, BARE_UV = "bare aiohttp (asyncio)", "bare aiohttp (uvloop)"
MITM = "mitmdump -w (reverse)"
W1, W1_UV, W2 = "record, 1 worker (asyncio)", "record, 1 worker (uvloop)", "record, 2 workers (asyncio)"
TOKENS = 64  # content tokens per stream: 68 events with the role, stop, usage and [DONE] frames


@dataclass
class Target:
    name: str
    url: str
    proc: subprocess.Popen[str]
    chunks_s: list[float] = field(default_factory=list)  # per round
    requests_s: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)  # proxy CPU per chunk, per round
    failures: int = 0


def uvloop_argv(argv: list[str]) -> list[str]:
    """A Python command that runs `argv` (a module's main) with uvloop's event loop policy."""
    code = (
        f"import asyncio, sys, uvloop; asyncio.set_event_loop_policy(uvloop.EventLoopPolicy()); sys.argv = {argv!r}; "
    )
    if argv[0] == "bench":
        code += "from bench.cli import main; main()"
    else:
        code += f"sys.path.insert(0, {str(Path(__file__).resolve().parent)!r}); import proxy_overhead; "
        code += "sys.exit(proxy_overhead.main())"
    return [sys.executable, "-c", code]


def start_targets(upstream: str, tmp: Path, env: dict[str, str], mitmdump: str | None) -> list[Target]:
    py, po_path = sys.executable, str(Path(po.__file__).resolve())
    record = ["bench", "proxy", "--port", "0", "--upstream", upstream, "--mode", "record"]
    commands = {
        BARE: [py, po_path, "--serve-bare", upstream],
        BARE_UV: uvloop_argv(["proxy_overhead.py", "--serve-bare", upstream]),
        W1: [py, "-m", *record, "--cassettes", str(tmp / "w1")],
        W1_UV: uvloop_argv([*record, "--cassettes", str(tmp / "w1u")]),
        W2: [py, "-m", *record, "--workers", "2", "--cassettes", str(tmp / "w2")],
    }
    if importlib.util.find_spec("uvloop") is None:
        print("uvloop is not installed (pip install uvloop): measuring asyncio only", file=sys.stderr)
        del commands[BARE_UV], commands[W1_UV]
    targets = []
    for name, argv in commands.items():
        proc, url = po.start(argv, env)
        targets.append(Target(name, url, proc))
    if mitmdump is not None:
        targets.append(start_mitmdump(mitmdump, upstream, tmp / "mitm.flows"))
    return targets


def start_mitmdump(mitmdump: str, upstream: str, flows: Path) -> Target:
    """mitmdump as a recording reverse proxy (`-w`: every flow to a file; it buffers each streamed answer whole, the
    only way it stores one)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [mitmdump, "-q", "--mode", f"reverse:{upstream}", "--listen-host", "127.0.0.1", "--listen-port", str(port)]
    proc = subprocess.Popen([*argv, "-w", str(flows)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
                            start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return Target(MITM, f"http://127.0.0.1:{port}", proc)
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"could not start {mitmdump}")


async def stream_for(session: Any, url: str, seed: int, deadline: float, tally: list[int], itl_ms: float) -> None:
    """Streams one after another until the deadline: tally = [chunks, requests, failures]."""
    while time.monotonic() < deadline:
        body = po.request_body(seed, TOKENS, 0.0, itl_ms)
        try:
            async with session.post(url + "/v1/chat/completions", json=body, headers=po.AUTH) as resp:
                data = await resp.read()
        except Exception:  # a failed stream is counted, not fatal: the figures say how many
            tally[2] += 1
            continue
        events = data.count(b"data: ")
        if resp.status != 200 or events != TOKENS + 4 or not data.endswith(b"data: [DONE]\n\n"):
            tally[2] += 1
            continue
        tally[0] += events
        tally[1] += 1


async def one_round(target: Target, streams: int, seconds: float, itl_ms: float) -> None:
    import aiohttp

    tally = [0, 0, 0]
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(
            *(stream_for(session, target.url, i, time.monotonic() + 0.3, [0, 0, 0], itl_ms) for i in range(8))
        )
        await po.settled(target.proc.pid)
        cpu0, t0 = po.cpu_seconds(target.proc.pid), time.monotonic()
        deadline = t0 + seconds
        await asyncio.gather(*(stream_for(session, target.url, i, deadline, tally, itl_ms) for i in range(streams)))
        wall = time.monotonic() - t0
        await po.settled(target.proc.pid)
        cpu = po.cpu_seconds(target.proc.pid) - cpu0
    chunks, requests, failures = tally
    target.failures += failures
    target.chunks_s.append(chunks / wall)
    target.requests_s.append(requests / wall)
    target.cpu_us.append(cpu / max(chunks, 1) * 1e6)


def ratios(a: list[float], b: list[float]) -> list[float]:
    return [x / y for x, y in zip(a, b, strict=True)]


def report(
    targets: list[Target], args: argparse.Namespace, rounds: int, seconds: float, load: tuple[float, ...]
) -> None:
    by = {t.name: t for t in targets}
    bare, w1, w2 = by[BARE], by[W1], by[W2]
    med = statistics.median
    paced = f"paced {args.itl_ms:g} ms" if args.itl_ms else "unpaced"
    print(
        f"{rounds} rounds x {seconds:g} s of {args.streams} streams of {TOKENS} tokens ({paced}) per target, "
        f"on {os.cpu_count()} cores"
    )
    print(f"{'target':30} {'chunks/s':>9} {'req/s':>7} {'CPU us/chunk':>13} {'x bare':>7} {'chunks/CPU-s':>13} fail")
    for t in targets:
        rel = med(ratios(t.cpu_us, bare.cpu_us))
        per_core = med([1e6 / c for c in t.cpu_us])
        print(
            f"{t.name:30} {med(t.chunks_s):9.0f} {med(t.requests_s):7.0f} {med(t.cpu_us):13.1f} {rel:7.2f} "
            f"{per_core:13.0f} {t.failures}"
        )
    scale = med(ratios(w2.chunks_s, w1.chunks_s))
    cpu = med(ratios(w2.cpu_us, w1.cpu_us))
    print(
        f"2 workers / 1 worker: chunks/s {scale:.2f}x (range {min(ratios(w2.chunks_s, w1.chunks_s)):.2f}-"
        f"{max(ratios(w2.chunks_s, w1.chunks_s)):.2f}), CPU per chunk {cpu:.2f}x"
    )
    if BARE_UV in by:
        uv_bare = med(ratios(by[BARE_UV].cpu_us, bare.cpu_us))
        uv_rec = med(ratios(by[W1_UV].cpu_us, w1.cpu_us))
        print(f"uvloop / asyncio, CPU per chunk: bare {uv_bare:.2f}x, record {uv_rec:.2f}x")
    rate = med([1e6 / c for c in w1.cpu_us])
    print(
        f"model: a proxy given k cores of its own forwards k x {rate:.0f} chunks/s x (1 / {cpu:.2f}, the per-worker "
        f"CPU cost of sharding) = {16 * rate / cpu:.0f} chunks/s on 16 cores, if clients and upstream are elsewhere"
    )
    if MITM in by:
        print(f"record (1 worker) / mitmdump, CPU per chunk: {med(ratios(w1.cpu_us, by[MITM].cpu_us)):.2f}x")
    print(f"load average before / after: {load[0]:.2f} / {os.getloadavg()[0]:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2 rounds of 2 s: a smoke run")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=3.0, help="how long each round loads one target")
    parser.add_argument("--streams", type=int, default=64, help="streams in flight during a round")
    parser.add_argument("--mitmdump", metavar="PATH", help="also measure this mitmdump as a recording reverse proxy")
    parser.add_argument(
        "--itl-ms",
        type=float,
        default=0.0,
        help="pace the upstream's events (default 0: all at once, CPU-bound; paced, each event is a read of its own, "
        "as from a real model, and costs the proxy more)",
    )
    args = parser.parse_args()
    rounds, seconds = (2, 2.0) if args.quick else (args.rounds, args.seconds)
    load = os.getloadavg()
    env = {**os.environ, "PYTHONPATH": str(po.ROOT)}
    procs: list[subprocess.Popen[str]] = []
    with tempfile.TemporaryDirectory(prefix="bench-throughput-") as tmp:
        try:
            up, upstream = po.start([sys.executable, str(Path(po.__file__).resolve()), "--serve-upstream"], env)
            procs.append(up)
            targets = start_targets(upstream, Path(tmp), env, args.mitmdump)
            procs += [t.proc for t in targets]
            for _ in range(rounds):
                for target in random.sample(targets, len(targets)):
                    asyncio.run(one_round(target, args.streams, seconds, args.itl_ms))
        finally:
            for proc in procs:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGTERM)
                    try:
                        proc.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        os.killpg(proc.pid, signal.SIGKILL)
        report(targets, args, rounds, seconds, load)
    return 0


if __name__ == "__main__":
    sys.exit(main())
