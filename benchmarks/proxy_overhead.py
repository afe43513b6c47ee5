"""What `bench proxy` costs over a direct connection and over a bare aiohttp pass-through (issue 2's figures).

    .venv/bin/python benchmarks/proxy_overhead.py            # full run, ~1.5 minutes on 2 cores
    .venv/bin/python benchmarks/proxy_overhead.py --quick    # a smoke run, ~15 s
    .venv/bin/python benchmarks/proxy_overhead.py --baseline ../old-checkout   # a change against the code before it

Everything runs on loopback, each server in its own process: a paced mock upstream (OpenAI-style SSE chunks of
~230 bytes with real-word text), a bare aiohttp pass-through (the floor for an aiohttp proxy), `bench proxy
--mode passthrough` and `bench proxy --mode record`. The client (this process) measures, in interleaved rounds
with the targets in random order each round:
  - TTFT at one stream at a time: request sent -> first read holding a content token; "added" is the median of
    round medians minus direct's (p99 over all streams minus direct's p99);
  - ITL with 256 concurrent paced streams: gaps between consecutive token reads, p50/p99, minus direct's;
  - proxy CPU per forwarded chunk in that phase, from /proc/PID/stat (all threads, the cassette writer included);
  - the record proxy's cassette size against the raw bytes it recorded.
Streams through every target are checked byte-identical to direct ones.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "host", "content-length"})
CLK_TCK = os.sysconf("SC_CLK_TCK")
AUTH = {"Authorization": "Bearer sk-bench-overhead-0123456789abcdef"}

# -- the mock upstream (a subprocess) -------------------------------------------------------------------------------


def _vocabulary() -> tuple[list[str], list[int]]:
    """Real English words with their frequencies, from stdlib sources: token text that compresses like prose."""
    import argparse as a
    import asyncio as b
    import json as c
    import logging as d
    import typing as e

    text = ""
    for module in (a, b, c, d, e):
        if module.__file__:
            text += Path(module.__file__).read_text(errors="replace")
    counts = Counter(re.findall(r"[a-z]{2,12}", text.lower()))
    words = [w for w, _ in counts.most_common(3000)]
    return words, [counts[w] for w in words]


def stream_chunks(seed: int, tokens: int) -> list[bytes]:
    rng = random.Random(seed)
    words, weights = _VOCAB
    ident = f"chatcmpl-{rng.getrandbits(96):024x}"
    head = f'{{"id":"{ident}","object":"chat.completion.chunk","created":{1_700_000_000 + seed},"model":"bench-mock-7b"'
    head += ',"system_fingerprint":"fp_mock","choices":[{"index":0,"delta":'

    def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
        tail = f',"logprobs":null,"finish_reason":{json.dumps(finish)}}}]}}'
        return b"data: " + (head + json.dumps(delta, separators=(",", ":")) + tail).encode() + b"\n\n"

    out = [event({"role": "assistant", "content": ""})]
    for word in rng.choices(words, weights, k=tokens):
        out.append(event({"content": " " + word}))
    out.append(event({}, "stop"))
    usage = {"prompt_tokens": 40, "completion_tokens": tokens, "total_tokens": 40 + tokens}
    out.append(f'data: {{"id":"{ident}","choices":[],"usage":{json.dumps(usage)}}}\n\n'.encode())
    out.append(b"data: [DONE]\n\n")
    return out


_VOCAB: tuple[list[str], list[int]] = ([], [])


async def serve_upstream() -> None:
    from aiohttp import web

    global _VOCAB
    _VOCAB = _vocabulary()

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        chunks = stream_chunks(int(body["seed"]), int(body["x_tokens"]))
        ttft, itl = float(body["x_ttft_ms"]) / 1000, float(body["x_itl_ms"]) / 1000
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "x-request-id": f"req_{body['seed']}"}
        )
        await response.prepare(request)
        loop = asyncio.get_running_loop()
        start = loop.time() + ttft
        for i, chunk in enumerate(chunks):
            # Role frame and first token at TTFT (no timer between them: timer jitter would swamp the sub-ms figures
            # measured on TTFT), then one token per ITL; the end frames follow the last token at once.
            due = start + max(0, min(i, len(chunks) - 4) - 1) * itl
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            await response.write(chunk)
        await response.write_eof()
        return response

    await _serve(web, chat)


async def serve_bare(upstream: str) -> None:
    """The floor: the least an aiohttp proxy can do (no parsing, no recording, one write per read)."""
    import aiohttp
    from aiohttp import web

    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), auto_decompress=False)

    async def handle(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP}
        async with session.request(request.method, upstream + request.path_qs, headers=headers, data=body) as up:
            resp = web.StreamResponse(
                status=up.status, headers={k: v for k, v in up.headers.items() if k.lower() not in HOP}
            )
            await resp.prepare(request)
            async for chunk in up.content.iter_any():
                await resp.write(chunk)
            await resp.write_eof()
            return resp

    await _serve(web, handle)


async def _serve(web: Any, handler: Any) -> None:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=2048)
    await site.start()
    print(f"listening on http://127.0.0.1:{runner.addresses[0][1]}", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await runner.cleanup()


# -- orchestration --------------------------------------------------------------------------------------------------


@dataclass
class Target:
    name: str
    url: str
    proc: subprocess.Popen[str] | None = None
    ttft_rounds: list[list[float]] = field(default_factory=list)
    ttft_all: list[float] = field(default_factory=list)
    itl: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    chunks: int = 0
    cpu_rounds: list[float] = field(default_factory=list)  # CPU us per chunk, one per load round
    ttft_cpu_s: float = 0.0  # proxy CPU during the one-at-a-time phase
    ttft_streams: int = 0
    failures: int = 0
    why: Counter[str] = field(default_factory=Counter)


def start(args: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, start_new_session=True
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if m := re.search(r"listening on (http://[\d.:]+)", line):
            return proc, m.group(1)
    proc.kill()
    raise SystemExit(f"could not start {' '.join(args)}")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime, all threads


def listen_overflows() -> int:
    lines = Path("/proc/net/netstat").read_text().splitlines()
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        if names.startswith("TcpExt:"):
            table = dict(zip(names.split()[1:], values.split()[1:], strict=False))
            return int(table.get("ListenOverflows", 0))
    return 0


def pct(values: list[float], p: float) -> float:
    """Percentile by linear interpolation (numpy's default)."""
    if not values:
        return float("nan")
    s = sorted(values)
    k = (len(s) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def median(values: list[float]) -> float:
    return pct(values, 50)


async def one_stream(session: Any, url: str, body: dict[str, Any]) -> tuple[float | None, list[float], bytes, int]:
    """(TTFT s, token read times, all bytes, reads) of one streamed chat completion."""
    t0 = time.perf_counter()
    token_times: list[float] = []
    data = bytearray()
    reads = 0
    # Real clients send a key: the record proxy redacts it and searches every body for it (the cost measured here).
    async with session.post(url + "/v1/chat/completions", json=body, headers=AUTH) as resp:
        while True:
            chunk = await resp.content.readany()
            if not chunk:
                break
            t = time.perf_counter()
            reads += 1
            data += chunk
            # Token events only: the role frame is {"role":"assistant","content":""} and may share the read.
            if b'"delta":{"content":"' in chunk:
                token_times.append(t)
    ttft = token_times[0] - t0 if token_times else None
    return ttft, token_times, bytes(data), reads


def request_body(seed: int, tokens: int, ttft_ms: float, itl_ms: float) -> dict[str, Any]:
    return {
        "model": "bench-mock-7b",
        "stream": True,
        "messages": [{"role": "user", "content": f"Tell me a story, number {seed}."}],
        "seed": seed,
        "x_tokens": tokens,
        "x_ttft_ms": ttft_ms,
        "x_itl_ms": itl_ms,
    }


async def ttft_phase(targets: list[Target], rounds: int, per_round: int, check: dict[int, bytes]) -> None:
    import aiohttp

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        for r in range(rounds):
            order = targets[:]
            random.shuffle(order)
            for target in order:
                times = []
                cpu0 = cpu_seconds(target.proc.pid) if target.proc else 0.0
                for i in range(per_round):
                    seed = 1000 + i
                    ttft, _, data, _ = await one_stream(session, target.url, request_body(seed, 8, 0, 1))
                    if ttft is None or (seed in check and check[seed] != data):
                        target.failures += 1
                        target.why["bytes differ from direct" if ttft is not None else "no token"] += 1
                        continue
                    check.setdefault(seed, data)
                    times.append(ttft)
                target.ttft_rounds.append(times)
                target.ttft_all.extend(times)
                if target.proc:
                    target.ttft_cpu_s += cpu_seconds(target.proc.pid) - cpu0
                    target.ttft_streams += per_round
            print(f"  ttft round {r + 1}/{rounds}", end="\r", file=sys.stderr, flush=True)
    print(file=sys.stderr)


async def load_phase(targets: list[Target], rounds: int, streams: int, tokens: int, itl_ms: float) -> None:
    import aiohttp

    for r in range(rounds):
        order = targets[:]
        random.shuffle(order)
        for target in order:
            connector = aiohttp.TCPConnector(limit=0)
            async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as s:
                cpu0 = cpu_seconds(target.proc.pid) if target.proc else 0.0
                bodies = [request_body(50_000 + r * streams + i, tokens, 20, itl_ms) for i in range(streams)]
                results = await asyncio.gather(*(one_stream(s, target.url, b) for b in bodies), return_exceptions=True)
                cpu = cpu_seconds(target.proc.pid) - cpu0 if target.proc else 0.0
            # Every stream went through the proxy, finished or not: its events count as forwarded.
            chunks = streams * (tokens + 4)  # upstream events: role, tokens, finish, usage, [DONE]
            target.cpu_s += cpu
            target.chunks += chunks
            target.cpu_rounds.append(cpu / chunks * 1e6)
            for result in results:
                if isinstance(result, BaseException) or not result[2].endswith(b"data: [DONE]\n\n"):
                    target.failures += 1
                    target.why[type(result).__name__ if isinstance(result, BaseException) else "no [DONE]"] += 1
                    continue
                token_times = result[1]
                target.itl.extend(b - a for a, b in itertools.pairwise(token_times))
            print(f"  load round {r + 1}/{rounds} {target.name}          ", end="\r", file=sys.stderr, flush=True)
    print(file=sys.stderr)


def cassette_figures(directory: Path) -> tuple[int, int, int, int, list[int], list[int]]:
    """File bytes, raw response bytes, raw body bytes incl. requests, exchanges of the record proxy's cassettes, and
    the proxy's own time (us) before forwarding and in total, per exchange, as it recorded them."""
    sys.path.insert(0, str(ROOT))
    from bench.cassette import CassetteReader, find_cassettes

    size = raw_resp = raw_all = n = 0
    before: list[int] = []
    own: list[int] = []
    for path in find_cassettes([directory]):
        size += path.stat().st_size
        for record in CassetteReader(path):
            n += 1
            before.append(int(record["timing"]["sent_upstream"]))
            own.append(int(record["timing"]["proxy_us"]))
            resp = int(record["response"]["raw_bytes"])
            raw_resp += resp
            raw_all += resp + len(record["request"]["body"])
    return size, raw_resp, raw_all, n, before, own


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer rounds and streams: a smoke run")
    parser.add_argument("--streams", type=int, help="concurrent streams in the load phase (default 256)")
    parser.add_argument(
        "--baseline",
        metavar="SRC",
        type=Path,
        help="also run `bench proxy --mode record` from another source tree (say, main's) in the same rounds",
    )
    parser.add_argument("--serve-upstream", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-bare", metavar="UPSTREAM", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_upstream:
        asyncio.run(serve_upstream())
        return 0
    if args.serve_bare:
        asyncio.run(serve_bare(args.serve_bare))
        return 0

    ttft_rounds, per_round = (6, 5) if args.quick else (30, 10)
    load_rounds, streams = (1, 64) if args.quick else (10, 256)
    streams = args.streams or streams
    tokens, itl_ms = (40, 25.0)
    py = sys.executable
    me = str(Path(__file__).resolve())
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs: list[subprocess.Popen[str]] = []
    with tempfile.TemporaryDirectory(prefix="bench-proxy-bench-") as tmp:
        cassettes = Path(tmp) / "cassettes"
        try:
            up_proc, upstream = start([py, me, "--serve-upstream"], env)
            procs.append(up_proc)
            bare_proc, bare = start([py, me, "--serve-bare", upstream], env)
            procs.append(bare_proc)
            bench = [py, "-m", "bench", "proxy", "--port", "0", "--upstream", upstream, "--cassettes", str(cassettes)]
            pass_proc, passthrough = start([*bench, "--mode", "passthrough"], env)
            procs.append(pass_proc)
            rec_proc, record = start([*bench, "--mode", "record"], env)
            procs.append(rec_proc)
            targets = [
                Target("direct", upstream),
                Target("bare aiohttp", bare, bare_proc),
                Target("bench passthrough", passthrough, pass_proc),
                Target("bench record", record, rec_proc),
            ]
            if args.baseline:
                src = args.baseline.resolve()
                base_cmd = [*bench[:-1], str(Path(tmp) / "baseline"), "--mode", "record"]
                base_proc, baseline = start(base_cmd, {**os.environ, "PYTHONPATH": str(src)}, cwd=src)
                procs.append(base_proc)
                targets.append(Target("record (baseline)", baseline, base_proc))
            overflows0 = listen_overflows()
            started = time.monotonic()
            check: dict[int, bytes] = {}
            print(f"TTFT: {ttft_rounds} rounds x {per_round} sequential streams per target", file=sys.stderr)
            asyncio.run(ttft_phase(targets, 2, 5, check))  # warm-up: imports, connection pools, caches
            for t in targets:
                t.ttft_rounds.clear()
                t.ttft_all.clear()
                t.ttft_cpu_s, t.ttft_streams = 0.0, 0
            asyncio.run(ttft_phase(targets, ttft_rounds, per_round, check))
            print(f"load: {load_rounds} rounds x {streams} concurrent streams of {tokens} tokens", file=sys.stderr)
            asyncio.run(load_phase(targets, load_rounds, streams, tokens, itl_ms))
            overflows = listen_overflows() - overflows0
            rec_proc.send_signal(signal.SIGINT)
            rec_proc.wait(timeout=60)
            size, raw_resp, raw_all, exchanges, before, own = cassette_figures(cassettes)
            elapsed = time.monotonic() - started
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in procs:
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()

    report(targets, size, raw_resp, raw_all, exchanges, overflows, elapsed, streams)
    before_p50 = median([float(b) for b in before])
    own_p50 = median([float(o) for o in own])
    print(
        f"record proxy's own time as it recorded it: before forwarding p50 {before_p50:.0f} us, "
        f"whole exchange p50 {own_p50:.0f} us (timing.sent_upstream, timing.proxy_us)"
    )
    print(f"machine load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return 0


def report(
    targets: list[Target],
    size: int,
    raw_resp: int,
    raw_all: int,
    exchanges: int,
    overflows: int,
    elapsed: float,
    streams: int,
) -> None:
    direct, bare = targets[0], targets[1]
    base_p50 = median([median(r) for r in direct.ttft_rounds]) * 1e3
    base_p99 = pct(direct.ttft_all, 99) * 1e3
    itl50, itl99 = pct(direct.itl, 50) * 1e3, pct(direct.itl, 99) * 1e3
    bare_cpu = bare.cpu_s / bare.chunks * 1e6 if bare.chunks else float("nan")
    print()
    print(f"{'target':<18} {'TTFT p50':>9} {'+p50':>7} {'+p99':>7} | {'ITL p50':>8} {'+p50':>7} {'+p99':>7} |", end="")
    print(f" {'CPU/chunk':>9} {'vs bare':>8} | fails")
    for t in targets:
        p50 = median([median(r) for r in t.ttft_rounds]) * 1e3
        p99 = pct(t.ttft_all, 99) * 1e3
        i50, i99 = pct(t.itl, 50) * 1e3, pct(t.itl, 99) * 1e3
        if t.proc is None:
            cpu_text = f"{'-':>9} {'-':>8}"
        else:
            cpu = t.cpu_s / t.chunks * 1e6 if t.chunks else float("nan")
            cpu_text = f"{cpu:>7.1f}us {cpu / bare_cpu - 1:>+8.1%}"
        print(
            f"{t.name:<18} {p50:>7.3f}ms {p50 - base_p50:>+7.3f} {p99 - base_p99:>+7.3f} | {i50:>6.2f}ms "
            f"{i50 - itl50:>+7.3f} {i99 - itl99:>+7.3f} | {cpu_text} | {t.failures}"
        )
    rec = targets[3]
    rec_p50 = median([median(r) for r in rec.ttft_rounds]) * 1e3
    bare_p50 = median([median(r) for r in bare.ttft_rounds]) * 1e3
    rec_cpu = rec.cpu_s / rec.chunks * 1e6 if rec.chunks else float("nan")
    round_ratios = [r / b - 1 for r, b in zip(rec.cpu_rounds, bare.cpu_rounds, strict=False) if b]
    cpu_per_stream = [f"{t.name} {t.ttft_cpu_s / t.ttft_streams * 1e6:.0f} us" for t in targets if t.ttft_streams]
    print("proxy CPU per stream, one at a time (10 events each): " + ", ".join(cpu_per_stream))
    for t in targets:
        if t.why:
            print(f"{t.name} failures: {dict(t.why)}")
    print()
    print("(+ columns: milliseconds added over direct; TTFT = median of round medians, p99 over all streams)")
    print(f"cassette: {exchanges} exchanges, {size:,} bytes on disk; raw response bytes {raw_resp:,} ", end="")
    print(f"({raw_resp / size:.1f}x smaller), raw bodies incl. requests {raw_all:,} ({raw_all / size:.1f}x)")
    print(f"listen overflows during the run: {overflows}; measured in {elapsed:.0f} s; load phase: {streams} streams")
    print()
    print("goals (record mode):")
    added, over_bare = rec_p50 - base_p50, rec_p50 - bare_p50
    print(f"  TTFT p50 added over direct  {added:+.3f} ms  (goal <= 0.5 ms; over bare: {over_bare:+.3f} ms)")
    extra = rec_cpu / bare_cpu - 1
    rounds = " ".join(f"{x:+.0%}" for x in round_ratios)
    print(f"  CPU per chunk over bare     {extra:+.1%}  ({rec_cpu:.1f} vs {bare_cpu:.1f} us; goal <= +15%)", end="")
    print(f"; per round: {rounds}, median {median(round_ratios):+.1%}")
    print(f"  cassette vs raw stream      {raw_resp / size:.1f}x smaller  (goal >= 15x)")
    if len(targets) > 4:
        base = targets[4]
        baseline_p50 = median([median(r) for r in base.ttft_rounds]) * 1e3
        base_cpu = base.cpu_s / base.chunks * 1e6 if base.chunks else float("nan")
        ratios = [r / b for r, b in zip(rec.cpu_rounds, base.cpu_rounds, strict=False) if b]
        print("this tree's record mode against the baseline's, same rounds:")
        itl_diff = (pct(rec.itl, 50) - pct(base.itl, 50)) * 1e3
        print(f"  TTFT p50 {rec_p50 - baseline_p50:+.3f} ms; ITL p50 {itl_diff:+.3f} ms")
        print(f"  CPU per chunk {rec_cpu / base_cpu:.3f}x ({rec_cpu:.1f} vs {base_cpu:.1f} us)", end="")
        print(f"; per round: {' '.join(f'{x:.2f}' for x in ratios)}, median {median(ratios):.3f}x")


if __name__ == "__main__":
    sys.exit(main())
