"""What `bench proxy` costs over a direct connection and over a bare aiohttp pass-through (issues 2, 11 and 16).

    .venv/bin/python benchmarks/proxy_overhead.py            # full run, ~2.5 minutes on 2 quiet cores
    .venv/bin/python benchmarks/proxy_overhead.py --quick    # a smoke run, ~20 s
    git archive main | tar -x -C /tmp/base && .venv/bin/python benchmarks/proxy_overhead.py --baseline /tmp/base
                                                             # before/after: main's bench proxy measured alongside
                                                             # (--baseline again for more trees; --record-only
                                                             # measures only their record mode)
    .venv/bin/python benchmarks/proxy_overhead.py --quiet-check   # the goals checked, exit 1 if one is missed
                                                             # (refuses on a loaded machine: exit 2)
    .venv/bin/python benchmarks/proxy_overhead.py --attribute     # and where each proxy's loop stalls come from
    .venv/bin/python benchmarks/proxy_overhead.py --pin --realtime --rounds 30
                                                             # proxies on one core, clients + upstream on the other,
                                                             # all real-time: decides the goals on 2 cores

Everything runs on loopback, each server in its own process: a paced mock upstream (OpenAI-style SSE chunks of
~230 bytes with real-word text), a bare aiohttp pass-through (the floor for an aiohttp proxy), `bench proxy
--mode passthrough` and `bench proxy --mode record` (and the same two from --baseline's tree). The client (this
process) measures, in interleaved rounds with the targets in random order each round:
  - TTFT at one stream at a time: request sent -> first read holding a content token; median of round medians;
    over bare, the median over rounds of (target - bare) in the same round;
  - ITL with 256 concurrent paced streams: gaps between consecutive token reads; p50/p99 added over direct is the
    median over rounds of (target - direct) in the same round, so a noisy round moves it less;
  - proxy CPU per forwarded chunk in that phase, from its process CPU clock (all threads, the cassette writer and
    any child process included, read once it stops rising after the round's streams end; the part in the kernel from
    /proc/PID/stat),
    as a ratio to the bare pass-through's in the same round, median over rounds. The goals on these two are decided
    on that median's distribution-free 95% interval: one that straddles its limit is UNDECIDED, as for ITL p99;
  - for recording targets, the ITLs the cassette recorded against the ones the client measured on the same streams
    (same definition: gaps between reads holding a token), and the proxy's own loop stall per exchange
    (`timing.loop_lag_us`: the longest stretch its event loop ran without polling its sockets);
  - the cassette's size against the raw bytes recorded;
  - reads per stream at the client: a target whose loop stalls forwards piled-up events as one read (fewer reads,
    less CPU per nominal chunk, ITLs of ~0 for the merged events).
Streams through every target are checked byte-identical to direct ones. The machine should be quiet: other load
shows up as noise in every column (the load average is printed at the end, and the CPU the machine's other processes
took during the load rounds, per core).

`--pin` puts every proxy under test (bare, passthrough, record) on the first allowed core and the clients and the
upstream on the others: on 2 cores, without it, 256 clients, the upstream and the proxy share both, and a round's ITL
p99 is set by which process the kernel ran when, not by the proxy. `--realtime` (root) runs them all in the lowest
real-time class, so that other load on a shared machine waits while they run (docs/proxy.md, "What it costs").
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import itertools
import json
import math
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

LOAD_SEED = 50_000
TOKENS = 40  # content tokens per stream in the load phase
TOKEN_MARK = b'"delta":{"content":"'  # a token event; the role frame is {"role":"assistant","content":""}


@dataclass
class Target:
    name: str
    url: str
    proc: subprocess.Popen[str] | None = None
    cassettes: Path | None = None  # a recording target's own cassette folder
    ttft_rounds: list[list[float]] = field(default_factory=list)
    ttft_all: list[float] = field(default_factory=list)
    itl_rounds: list[list[float]] = field(default_factory=list)  # client ITL (s), one list per load round
    cpu_rounds: list[float] = field(default_factory=list)  # CPU us per chunk, one per load round
    # Of it, the threads other than the event loop's (the cassette writer; to_thread workers), one per load round
    thread_rounds: list[float] = field(default_factory=list)
    kernel_s: float = 0.0  # CPU seconds in the kernel over all load rounds (all threads; /proc ticks)
    load_chunks: int = 0
    reads: list[int] = field(default_factory=list)  # reads per whole stream at the client, load phase
    ttft_cpu_s: float = 0.0  # proxy CPU during the one-at-a-time phase
    ttft_streams: int = 0
    failures: int = 0
    why: Counter[str] = field(default_factory=Counter)
    recorded: Recorded | None = None
    probe: Path | None = None  # where benchmarks/proxy_probe.py writes this target's summary (--attribute)
    cpu0: float = 0.0  # its process's CPU seconds when the current load round began


@dataclass
class Recorded:
    """What a recording target wrote: its load-phase ITLs per round, loop lags, and sizes."""

    itl_rounds: dict[int, list[float]]  # recorded ITL (s) per load round, the client's definition
    loop_lag_us: list[int]  # timing.loop_lag_us of each load-phase exchange
    size: int
    raw_resp: int
    raw_all: int
    exchanges: int
    before_us: list[int]
    own_us: list[int]


def start(
    args: list[str], env: dict[str, str] | None = None, cpus: set[int] | None = None
) -> tuple[subprocess.Popen[str], str]:
    """Start a server and wait for its address; with `cpus`, it and every thread it starts run on those cores only."""
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    proc = subprocess.Popen(
        args,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,
        preexec_fn=pin,
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


def bench_proxy(
    src: Path, upstream: str, mode: str, cassettes: Path, probe: Path | None = None, workers: int = 0
) -> list[str]:
    """The command line of `bench proxy` run from the source tree `src` (this one, or a baseline to compare with);
    with `probe`, benchmarks/proxy_probe.py times its loop's stalls and writes its summary there; with `workers`,
    `--workers N` (their CPU is the supervisor's children's, counted with it)."""
    argv = ["bench", "proxy", "--port", "0", "--upstream", upstream, "--cassettes", str(cassettes), "--mode", mode]
    if workers:
        argv += ["--workers", str(workers)]
    code = f"import sys; sys.path.insert(0, {str(src)!r}); sys.argv = {argv!r}; "
    if probe is not None:
        here = str(Path(__file__).resolve().parent)
        code += f"sys.path.insert(0, {here!r}); import proxy_probe; proxy_probe.install({str(probe)!r}); "
    code += "from bench.cli import main; main()"
    return [sys.executable, "-c", code]


_LIBC = ctypes.CDLL(None, use_errno=True)


def children(pid: int) -> list[int]:
    """The live child processes of a process (a proxy's helpers count as its own CPU)."""
    found: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except (FileNotFoundError, ProcessLookupError):
        return found
    for task in tasks:
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return found


def cpu_seconds(pid: int) -> float:
    """CPU seconds of all of a process's threads and of its live child processes."""
    return _own_cpu_seconds(pid) + sum(_cpu_or_zero(child, own=True) for child in children(pid))


def _own_cpu_seconds(pid: int) -> float:
    """CPU seconds of all of a process's threads. Read from its CPU-time clock (nanoseconds) where the kernel lets
    another process read it: /proc/PID/stat counts in ticks of 10 ms, ~2% of a load round's proxy CPU."""
    clock = ctypes.c_int()
    if _LIBC.clock_getcpuclockid(pid, ctypes.byref(clock)) == 0:
        try:
            return time.clock_gettime(clock.value)
        except OSError:
            pass  # the process has ended
    return sum(_ticks(Path(f"/proc/{pid}/stat")))  # utime + stime, all threads


def _ticks(stat: Path) -> tuple[float, float]:
    """(user, kernel) CPU seconds from a /proc stat file (a process's or one thread's), in ticks of 10 ms."""
    fields = stat.read_text().rsplit(")", 1)[1].split()  # the name, in parentheses, may hold spaces
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def kernel_seconds(pid: int) -> float:
    """CPU seconds a process's threads and its child processes spent in the kernel (stime; ticks of 10 ms: summed
    over a run, not per round)."""
    total = 0.0
    for one in (pid, *children(pid)):
        try:
            total += _ticks(Path(f"/proc/{one}/stat"))[1]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def side_threads_cpu(pid: int) -> float:
    """CPU seconds of a process's threads other than its main one (whose thread id is the pid) and of its child
    processes: the event loop runs on the main thread, the cassette writer and any `to_thread` worker on the others
    (exited threads not counted)."""
    total = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        if task.name == str(pid):
            continue
        try:
            total += sum(_ticks(task / "stat"))
        except (FileNotFoundError, ProcessLookupError):
            continue  # ended meanwhile
    return total + sum(_cpu_or_zero(child, own=True) for child in children(pid))  # a child may end meanwhile


def busy_per_cpu() -> dict[int, float]:
    """CPU seconds each core has spent busy since boot (user, nice, system, irq, softirq, steal), from /proc/stat."""
    out: dict[int, float] = {}
    for line in Path("/proc/stat").read_text().splitlines():
        name, *values = line.split()
        if name.startswith("cpu") and name != "cpu":
            v = [int(x) for x in values]
            out[int(name[3:])] = (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / CLK_TCK
    return out


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


def pooled_over(
    target: list[list[float]], base: list[list[float]], p: float, resamples: int = 2000
) -> tuple[float, float, float]:
    """(target - base) of the ITL percentile over all the run's gaps (ms), as serving benchmarks pool every ITL of a
    run, with a 95% interval from resampling whole rounds, paired (a round drawn counts for both targets).

    A round's own p99 is set by whatever stalled in that round (a 256-stream round has ~10,000 gaps, so ~100 gaps past
    its p99: one 20 ms stop of the machine that crosses every stream's gap moves it by 20 ms). Pooled over the run,
    a rare stall is a few hundredths of a percent of the gaps and moves the p99 only as often as it happens."""
    import numpy as np

    res = 10e-6  # 10 us bins: far finer than the goals (0.1 and 0.3 ms)
    top = max(max((max(r) for r in rounds if r), default=0.0) for rounds in (target, base))
    bins = int(top / res) + 2

    def counts(rounds: list[list[float]]) -> Any:
        return np.stack([np.bincount((np.asarray(r) / res).astype(np.int64), minlength=bins) for r in rounds])

    a, b = counts(target), counts(base)

    def quantile(hist: Any) -> Any:  # per row of pooled histograms: the bin where the cumulative count reaches p
        cum = np.cumsum(hist, axis=-1)
        return np.argmax(cum >= cum[..., -1:] * (p / 100), axis=-1) * res * 1e3

    point = float(quantile(a.sum(0)) - quantile(b.sum(0)))
    rng = np.random.default_rng(1)
    n = len(target)
    weights = rng.multinomial(n, [1 / n] * n, size=resamples)  # how often each round is drawn in each resample
    diffs = quantile(weights @ a) - quantile(weights @ b)
    lo, hi = np.percentile(diffs, [2.5, 97.5])
    return point, float(lo), float(hi)


RT_RUNTIME = Path("/proc/sys/kernel/sched_rt_runtime_us")
_rt_runtime_before: str | None = None


def lift_rt_throttling() -> str:
    """Let real-time tasks run for all of each second during the run (restored after, `restore_rt_throttling`).

    By default the kernel gives real-time tasks 950 ms of each second per core and stops them for the rest: with 256
    clients and the upstream at 0.85-0.96 of their core, that cut fell in some rounds and not others, and stopped the
    load generator for up to 50 ms (the kernel logs "sched: RT throttling activated" once): the rounds that differed
    by 5-50 ms in every target (docs/proxy.md). The benchmark's processes block on sockets and end, so nothing spins."""
    global _rt_runtime_before
    try:
        before = RT_RUNTIME.read_text().strip()
    except OSError:
        return "unknown (no /proc/sys/kernel/sched_rt_runtime_us): rounds may be cut by it"
    if before == "-1":
        return "off"
    try:
        RT_RUNTIME.write_text("-1")
    except OSError:
        return f"on ({before} us of each second), could not lift it: rounds may be cut by it"
    _rt_runtime_before = before
    return f"lifted for the run (was {before} us of each second)"


def restore_rt_throttling() -> None:
    global _rt_runtime_before
    if _rt_runtime_before is not None:
        RT_RUNTIME.write_text(_rt_runtime_before)
        _rt_runtime_before = None


def median_ci(values: list[float]) -> tuple[float, float]:
    """A distribution-free 95% confidence interval for the median: the order statistics k and n+1-k with
    P(Binomial(n, 1/2) < k) <= 2.5% (nan, nan under 6 values, too few for one)."""
    n = len(values)
    if n < 6:
        return float("nan"), float("nan")
    s = sorted(values)
    k, below = 0, 0.0
    while True:
        below += math.comb(n, k) / 2**n  # P(X <= k)
        if below > 0.025:
            break
        k += 1
    # P(X < k) <= 2.5% with X ~ Binomial(n, 1/2): the interval [s[k-1], s[n-k]] (0-based) holds the median
    return s[max(k - 1, 0)], s[min(n - k, n - 1)]


def token_gaps(times: list[float], chunks: list[bytes]) -> list[float]:
    """Gaps between consecutive reads holding a content token: the ITL as the client and the recording both see it."""
    stamps = [t for t, chunk in zip(times, chunks, strict=True) if TOKEN_MARK in chunk]
    return [b - a for a, b in itertools.pairwise(stamps)]


async def one_stream(session: Any, url: str, body: dict[str, Any]) -> tuple[float | None, list[float], bytes, int]:
    """(TTFT s, ITLs s, all bytes, reads) of one streamed chat completion."""
    t0 = time.perf_counter()
    times: list[float] = []
    chunks: list[bytes] = []
    # Real clients send a key: the record proxy redacts it and searches every body for it (the cost measured here).
    async with session.post(url + "/v1/chat/completions", json=body, headers=AUTH) as resp:
        while True:
            chunk = await resp.content.readany()
            if not chunk:
                break
            times.append(time.perf_counter())
            chunks.append(chunk)
    first = next((t for t, c in zip(times, chunks, strict=True) if TOKEN_MARK in c), None)
    ttft = None if first is None else first - t0
    return ttft, token_gaps(times, chunks), b"".join(chunks), len(chunks)


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


@dataclass
class Others:
    """The CPU the machine's other processes took during the load rounds (cores busy, per core), and the load."""

    ours: list[int]  # pids of this benchmark's processes (this one, the upstream, the proxies)
    proxy_cpus: set[int]  # the proxies' cores under --pin (empty: not pinned)
    on_proxy_core: list[float] = field(default_factory=list)  # cores' worth, per target-round
    elsewhere: list[float] = field(default_factory=list)
    loadavg: list[float] = field(default_factory=list)
    load_generator: list[float] = field(default_factory=list)  # the clients' and the upstream's CPU, cores' worth

    def measure(self) -> tuple[dict[int, float], float, float]:
        # This process is the parent of the others: each process's own CPU, and its children's that are not ours.
        ours = set(self.ours)
        helpers = [child for pid in self.ours for child in children(pid) if child not in ours]
        cpu = sum(_cpu_or_zero(pid, own=True) for pid in [*self.ours, *helpers])
        return busy_per_cpu(), cpu, time.monotonic()

    def add(self, before: tuple[dict[int, float], float, float], target: Target) -> None:
        """Other processes' CPU since `before`. Pinned, the proxy core's busy time less the target's is the others'
        (the idle proxies take ~0); the rest of our CPU is on the other cores."""
        busy0, ours0, t0 = before
        busy, ours, t = self.measure()
        wall = t - t0
        used = {c: busy[c] - busy0.get(c, busy[c]) for c in busy}
        total_ours = ours - ours0
        target_cpu = _cpu_or_zero(target.proc.pid) - target.cpu0 if target.proc else 0.0
        self.load_generator.append((total_ours - target_cpu) / wall)
        if self.proxy_cpus:
            on = sum(used[c] for c in self.proxy_cpus if c in used) - target_cpu
            off = sum(v for c, v in used.items() if c not in self.proxy_cpus) - (total_ours - target_cpu)
            self.on_proxy_core.append(max(0.0, on) / wall)
            self.elsewhere.append(max(0.0, off) / wall)
        else:
            self.elsewhere.append(max(0.0, sum(used.values()) - total_ours) / wall)
        self.loadavg.append(os.getloadavg()[0])


def _cpu_or_zero(pid: int, own: bool = False) -> float:
    try:
        return _own_cpu_seconds(pid) if own else cpu_seconds(pid)
    except (FileNotFoundError, ProcessLookupError):
        return 0.0


async def load_phase(
    targets: list[Target], rounds: int, streams: int, tokens: int, itl_ms: float, others: Others
) -> None:
    import aiohttp

    for r in range(rounds):
        order = targets[:]
        random.shuffle(order)
        for target in order:
            connector = aiohttp.TCPConnector(limit=0)
            async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as s:
                cpu0 = target.cpu0 = cpu_seconds(target.proc.pid) if target.proc else 0.0
                side0 = side_threads_cpu(target.proc.pid) if target.proc else 0.0
                kernel0 = kernel_seconds(target.proc.pid) if target.proc else 0.0
                before = others.measure()
                bodies = [request_body(LOAD_SEED + r * streams + i, tokens, 20, itl_ms) for i in range(streams)]
                results = await asyncio.gather(*(one_stream(s, target.url, b) for b in bodies), return_exceptions=True)
                if target.proc:
                    await settled(target.proc.pid)
                cpu = cpu_seconds(target.proc.pid) - cpu0 if target.proc else 0.0
                side = side_threads_cpu(target.proc.pid) - side0 if target.proc else 0.0
                target.kernel_s += kernel_seconds(target.proc.pid) - kernel0 if target.proc else 0.0
                others.add(before, target)
            # Every stream went through the proxy, finished or not: its events count as forwarded.
            chunks = streams * (tokens + 4)  # upstream events: role, tokens, finish, usage, [DONE]
            target.cpu_rounds.append(cpu / chunks * 1e6)
            target.thread_rounds.append(side / chunks * 1e6)
            target.load_chunks += chunks
            gaps: list[float] = []
            for result in results:
                if isinstance(result, BaseException) or not result[2].endswith(b"data: [DONE]\n\n"):
                    target.failures += 1
                    target.why[type(result).__name__ if isinstance(result, BaseException) else "no [DONE]"] += 1
                    continue
                gaps.extend(result[1])
                target.reads.append(result[3])
            target.itl_rounds.append(gaps)
            print(f"  load round {r + 1}/{rounds} {target.name}          ", end="\r", file=sys.stderr, flush=True)
    print(file=sys.stderr)


async def settled(pid: int, quiet_s: float = 0.001, poll_s: float = 0.05, most_s: float = 2.0) -> None:
    """Wait until a proxy has finished the round's work: a proxy that records later than a response ends (or in
    another process) would otherwise have part of a round's CPU counted in no round."""
    deadline = time.monotonic() + most_s
    before = cpu_seconds(pid)
    while time.monotonic() < deadline:
        await asyncio.sleep(poll_s)
        now = cpu_seconds(pid)
        if now - before < quiet_s:
            return
        before = now


def recorded(directory: Path, streams: int) -> Recorded:
    """Read a recording target's cassettes: the load phase's recorded ITLs by round (the round is in the seed) and
    loop lags; sizes; the proxy's own time before forwarding and in total, per exchange, as it recorded them."""
    sys.path.insert(0, str(ROOT))
    from bench.core.cassette import CassetteReader, find_cassettes

    out = Recorded({}, [], 0, 0, 0, 0, [], [])
    for path in find_cassettes([directory]):
        out.size += path.stat().st_size
        for record in CassetteReader(path):
            out.exchanges += 1
            timing, response = record.timing, record.response
            out.before_us.append(timing.sent_upstream or 0)
            out.own_us.append(timing.proxy_us)
            resp = response.raw_bytes
            out.raw_resp += resp
            out.raw_all += resp + len(record.request.body)
            seed = int(json.loads(record.request.body)["seed"])
            if seed < LOAD_SEED:
                continue
            if timing.loop_lag_us is not None:
                out.loop_lag_us.append(timing.loop_lag_us)
            times = list(itertools.accumulate(d / 1e6 for d in response.chunk_us))
            gaps = out.itl_rounds.setdefault((seed - LOAD_SEED) // streams, [])
            gaps.extend(token_gaps(times, list(response.chunks)))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer rounds and streams: a smoke run")
    parser.add_argument("--streams", type=int, help="concurrent streams in the load phase (default 256)")
    parser.add_argument("--rounds", type=int, help="load rounds (default 10; interleaved, medians of rounds)")
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="SRC",
        action="append",
        default=[],
        help="also measure bench proxy from another source tree (e.g. `git archive main | tar -x -C SRC`); may be "
        "given more than once",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=0,
        metavar="N",
        help="also measure this tree's record mode with `--workers N` (issue 34: its ITL tail and CPU per chunk)",
    )
    parser.add_argument(
        "--record-only",
        action="store_true",
        help="measure only record mode from the --baseline trees (shorter A/B runs of record-path changes)",
    )
    parser.add_argument(
        "--attribute",
        action="store_true",
        help="also run each bench proxy under benchmarks/proxy_probe.py and print where its loop stalls came from "
        "(the probe costs CPU: its run's overhead figures are not the ones to quote)",
    )
    parser.add_argument(
        "--quiet-check",
        action="store_true",
        help="check the goals and exit 1 if any is missed; refuses (exit 2) on a machine whose load average is over "
        "1 per core, where wall-clock figures measure the other load",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="run the proxies under test on the first allowed core and the clients and the upstream on the others, "
        "so that a round's ITL tail is the proxy's, not the kernel's choice of which process to run",
    )
    parser.add_argument(
        "--realtime",
        action="store_true",
        help="run the benchmark's processes (clients, upstream, proxies) in the lowest real-time class (SCHED_FIFO 1; "
        "needs root or CAP_SYS_NICE): other load then waits while they run, instead of delaying their wake-ups by "
        "milliseconds (nice -20 does not: the kernel still lets the running task finish its slice)",
    )
    parser.add_argument("--tokens", type=int, help=f"content tokens per stream in the load phase (default {TOKENS})")
    parser.add_argument("--serve-upstream", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-bare", metavar="UPSTREAM", help=argparse.SUPPRESS)
    parser.add_argument("--probe", metavar="PATH", help=argparse.SUPPRESS)  # --serve-bare under proxy_probe
    args = parser.parse_args()
    if args.serve_upstream:
        asyncio.run(serve_upstream())
        return 0
    if args.serve_bare:
        if args.probe:
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            import proxy_probe

            proxy_probe.install(args.probe, writer=False)
        asyncio.run(serve_bare(args.serve_bare))
        return 0

    if args.quiet_check and os.getloadavg()[0] > (os.cpu_count() or 1):
        print(
            f"proxy_overhead: load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores: not quiet enough "
            "for --quiet-check (wall-clock goals would measure the other load); run it on an idle machine",
            file=sys.stderr,
        )
        return 2
    ttft_rounds, per_round = (6, 5) if args.quick else (30, 10)
    load_rounds, streams = (2, 64) if args.quick else (10, 256)
    streams = args.streams or streams
    load_rounds = args.rounds or load_rounds
    tokens, itl_ms = (args.tokens or TOKENS, 25.0)
    if args.realtime:
        try:
            # Inherited by every process and thread started from here.
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        except PermissionError:
            print("proxy_overhead: --realtime needs root or CAP_SYS_NICE; run without it", file=sys.stderr)
            return 2
        throttle_note = lift_rt_throttling()
        print(f"real-time throttling: {throttle_note}", file=sys.stderr)
    try:
        return run(args, ttft_rounds, per_round, load_rounds, streams, tokens, itl_ms)
    finally:
        if args.realtime:
            restore_rt_throttling()


def run(
    args: argparse.Namespace,
    ttft_rounds: int,
    per_round: int,
    load_rounds: int,
    streams: int,
    tokens: int,
    itl_ms: float,
) -> int:
    proxy_cpus: set[int] = set()
    client_cpus: set[int] | None = None
    if args.pin:
        allowed = sorted(os.sched_getaffinity(0))
        if len(allowed) < 2:
            print("proxy_overhead: --pin needs at least 2 cores", file=sys.stderr)
            return 2
        proxy_cpus, client_cpus = {allowed[0]}, set(allowed[1:])
        os.sched_setaffinity(0, client_cpus)  # this process: the clients (and what it starts unpinned)
    py = sys.executable
    me = str(Path(__file__).resolve())
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs: list[subprocess.Popen[str]] = []
    sources = [("", ROOT)] + [
        (" (baseline)" if len(args.baseline) == 1 else f" (baseline {n})", src.resolve())
        for n, src in enumerate(args.baseline, 1)
    ]
    with tempfile.TemporaryDirectory(prefix="bench-proxy-bench-") as tmp:
        try:
            up_proc, upstream = start([py, me, "--serve-upstream"], env, client_cpus)
            procs.append(up_proc)
            bare_probe = Path(tmp) / "probe-bare.json" if args.attribute else None
            bare_args = ["--probe", str(bare_probe)] if bare_probe else []
            bare_proc, bare = start([py, me, "--serve-bare", upstream, *bare_args], env, proxy_cpus)
            procs.append(bare_proc)
            targets = [Target("direct", upstream), Target("bare aiohttp", bare, bare_proc)]
            targets[1].probe = bare_probe
            for suffix, src in sources:
                for mode in ("record",) if args.record_only and src != ROOT else ("passthrough", "record"):
                    cassettes = Path(tmp) / f"{mode}{len(targets)}"
                    probe = Path(tmp) / f"probe-{mode}{len(targets)}.json" if args.attribute else None
                    proc, url = start(bench_proxy(src, upstream, mode, cassettes, probe), env, proxy_cpus)
                    procs.append(proc)
                    target = Target(f"bench {mode}{suffix}", url, proc, cassettes if mode == "record" else None)
                    target.probe = probe
                    targets.append(target)
            if args.workers:
                cassettes = Path(tmp) / f"workers{len(targets)}"
                proc, url = start(
                    bench_proxy(ROOT, upstream, "record", cassettes, workers=args.workers), env, proxy_cpus
                )
                procs.append(proc)
                targets.append(Target(f"bench record ({args.workers} workers)", url, proc, cassettes))
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
            others = Others([os.getpid()] + [p.pid for p in procs], proxy_cpus)
            asyncio.run(load_phase(targets, load_rounds, streams, tokens, itl_ms, others))
            overflows = listen_overflows() - overflows0
            for t in targets:
                if t.cassettes is not None and t.proc is not None:
                    t.proc.send_signal(signal.SIGINT)
                    t.proc.wait(timeout=60)
                    t.recorded = recorded(t.cassettes, streams)
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
            probes = {t.name: json.loads(t.probe.read_text()) for t in targets if t.probe and t.probe.exists()}

    missed = report(targets, overflows, elapsed, streams, load_rounds, tokens, others)
    if probes:
        attribution(probes)
    if args.quiet_check:
        print(f"quiet check: {'FAILED: ' + ', '.join(missed) if missed else 'every goal met'}")
        return 1 if missed else 0
    return 0


def _ms(value: float, sign: bool = True) -> str:
    return "-" if value != value else f"{value:+.3f}" if sign else f"{value:.3f}"


def report(
    targets: list[Target], overflows: int, elapsed: float, streams: int, rounds: int, tokens: int, others: Others
) -> list[str]:
    """Print the table and the goals; returns the goals missed."""
    direct, bare = targets[0], targets[1]

    def ttft_p50(t: Target) -> float:
        return median([median(r) for r in t.ttft_rounds]) * 1e3

    def itl_added(t: Target, p: float) -> float:
        """Median over rounds of (this target's ITL percentile - direct's in the same round), ms."""
        return median([(pct(a, p) - pct(d, p)) * 1e3 for a, d in zip(t.itl_rounds, direct.itl_rounds, strict=True)])

    def over_bare_rounds(t: Target, p: float) -> list[float]:
        """(this target's ITL percentile - bare's) in each round, ms: the rounds' common noise cancels."""
        return [(pct(a, p) - pct(b, p)) * 1e3 for a, b in zip(t.itl_rounds, bare.itl_rounds, strict=True)]

    def cpu_ratios(t: Target) -> list[float]:
        """(this target's CPU per chunk / bare's) in each load round."""
        return [a / b for a, b in zip(t.cpu_rounds, bare.cpu_rounds, strict=True) if b]

    def cpu_ratio(t: Target) -> float:
        return median(cpu_ratios(t))

    def ttft_over_bare(t: Target) -> list[float]:
        """(this target's TTFT p50 - bare's) in each TTFT round, ms: paired, so the rounds' common drift cancels."""
        pairs = zip(t.ttft_rounds, bare.ttft_rounds, strict=True)
        return [(median(a) - median(b)) * 1e3 for a, b in pairs if a and b]  # a round whose streams all failed: none

    def rec_minus_client(t: Target, p: float) -> float:
        """Median over rounds of (recorded ITL percentile - the client's, same streams), ms."""
        rec = t.recorded
        if rec is None:
            return float("nan")
        diffs = [(pct(rec.itl_rounds.get(i, []), p) - pct(c, p)) * 1e3 for i, c in enumerate(t.itl_rounds)]
        return median([d for d in diffs if d == d])

    base_p50 = ttft_p50(direct)
    print()
    print(f"{streams} concurrent paced streams x {rounds} interleaved rounds; ms; + columns: median over rounds of")
    print("(target - direct) in the same round; rec-client: recorded ITL percentile minus the client's, same streams")
    print()
    head = f"{'target':<28} {'TTFT p50':>8} {'+direct':>7} {'+bare':>7} | {'ITL +p50':>8} {'+p99':>7} {'p99-bare':>8} |"
    print(
        head
        + f" {'CPU/chunk':>9} {'x bare':>6} | {'rec-client p50':>14} {'p99':>7} | {'loop lag p50':>12} {'p99':>6} |"
    )
    for t in targets:
        p50 = ttft_p50(t)
        i50, i99 = itl_added(t, 50), itl_added(t, 99)
        over_bare = median(over_bare_rounds(t, 99))
        if t.proc is None:
            cpu_text = f"{'-':>9} {'-':>6}"
        else:
            cpu = median(t.cpu_rounds)
            cpu_text = f"{cpu:>7.1f}us {cpu_ratio(t):>6.2f}"
        rec = t.recorded
        lag = [v / 1e3 for v in rec.loop_lag_us] if rec else []
        ttft_bare = median(ttft_over_bare(t))
        print(
            f"{t.name:<28} {p50:>8.3f} {p50 - base_p50:>+7.3f} {ttft_bare:>+7.3f} | {i50:>+8.3f} {i99:>+7.3f} "
            f"{_ms(over_bare if t is not direct else float('nan')):>8} | {cpu_text} | "
            f"{_ms(rec_minus_client(t, 50)):>14} {_ms(rec_minus_client(t, 99)):>7} | "
            f"{_ms(pct(lag, 50), False):>12} {_ms(pct(lag, 99), False):>6} | {t.failures} fails"
        )
    print()
    for t in targets[1:]:
        per_round = " ".join(
            f"{(pct(a, 99) - pct(d, 99)) * 1e3:+.2f}" for a, d in zip(t.itl_rounds, direct.itl_rounds, strict=True)
        )
        print(f"ITL p99 added per round, {t.name}: {per_round}")
    for t in targets[2:]:
        diffs = over_bare_rounds(t, 99)
        lo, hi = median_ci(diffs)
        print(
            f"ITL p99 over bare, {t.name}: median {median(diffs):+.3f} ms, 95% CI of the median {_ms(lo)}..{_ms(hi)}, "
            f"quartiles {pct(diffs, 25):+.3f}..{pct(diffs, 75):+.3f}; per round: "
            + " ".join(f"{d:+.2f}" for d in diffs)
        )
        for p in (50, 99):
            value, lo, hi = pooled_over(t.itl_rounds, bare.itl_rounds, p)
            print(f"  pooled over the run's gaps: ITL p{p} over bare {value:+.3f} ms, 95% CI {_ms(lo)}..{_ms(hi)}")
        ratios = cpu_ratios(t)
        if ratios:
            lo, hi = median_ci(ratios)
            print(
                f"CPU per chunk over bare, {t.name}: median {median(ratios):.3f}x, 95% CI of the median "
                f"{lo:.3f}..{hi:.3f}; per round: " + " ".join(f"{r:.2f}" for r in ratios)
            )
    # Two trees' record modes against each other, round by round: no bare in the ratio, so its noise drops out.
    mine = next((t for t in targets if t.name == "bench record"), None)
    for t in targets:
        if mine is not None and t.name.startswith("bench record (baseline") and t.cpu_rounds and mine.cpu_rounds:
            paired = [b / a for a, b in zip(mine.cpu_rounds, t.cpu_rounds, strict=True) if a > 0]
            if paired:
                lo, hi = median_ci(paired)
                print(
                    f"CPU per chunk, {t.name} over this tree's record mode, paired by round: median "
                    f"{median(paired):.3f}x, 95% CI of the median {lo:.3f}..{hi:.3f}"
                )
    # A target that stalls lets several events pile up in its sockets and forwards them as one read: fewer reads,
    # less CPU per chunk, but the client's ITLs read ~0 for them. Direct shows the client's own merging.
    reads = ", ".join(f"{t.name} {sum(t.reads) / len(t.reads):.1f}" for t in targets if t.reads)
    print(f"reads per stream at the client under load ({tokens + 4} events sent): {reads}")
    side = ", ".join(f"{t.name} {median(t.thread_rounds):.2f}" for t in targets if t.thread_rounds)
    print(f"of the CPU per chunk, us on threads other than the event loop's (cassette writer, ...): {side}")
    kernel = ", ".join(f"{t.name} {t.kernel_s / t.load_chunks * 1e6:.2f}" for t in targets if t.proc and t.load_chunks)
    print(f"of the CPU per chunk, us in the kernel (system calls, wake-ups; all rounds): {kernel}")
    cpu_per_stream = [f"{t.name} {t.ttft_cpu_s / t.ttft_streams * 1e6:.0f} us" for t in targets if t.ttft_streams]
    print("proxy CPU per stream, one at a time (10 events each): " + ", ".join(cpu_per_stream))
    for t in targets:
        if t.why:
            print(f"{t.name} failures: {dict(t.why)}")
        rec = t.recorded
        if rec is not None and rec.size:
            print(
                f"{t.name} cassette: {rec.exchanges} exchanges, {rec.size:,} bytes; raw response bytes "
                f"{rec.raw_resp:,} ({rec.raw_resp / rec.size:.1f}x smaller), with requests {rec.raw_all:,} "
                f"({rec.raw_all / rec.size:.1f}x); own time before forwarding p50 {median(rec.before_us):.0f} us, "
                f"whole exchange p50 {median(rec.own_us):.0f} us"
            )
    print(f"listen overflows during the run: {overflows}; measured in {elapsed:.0f} s")
    print(f"machine load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(
        "other processes' CPU during the load rounds (cores busy, median / max): "
        + (
            f"on the proxy's core {median(others.on_proxy_core):.2f} / {max(others.on_proxy_core):.2f}, "
            if others.proxy_cpus
            else ""
        )
        + f"{'on the clients cores' if others.proxy_cpus else 'on all cores'} {median(others.elsewhere):.2f} / "
        f"{max(others.elsewhere):.2f}; load average during them {min(others.loadavg):.1f}-{max(others.loadavg):.1f}"
        + (f"; pinned: proxies on core {sorted(others.proxy_cpus)}" if others.proxy_cpus else "")
        + ("; real-time (SCHED_FIFO)" if os.sched_getscheduler(0) == os.SCHED_FIFO else "")
    )
    print(
        f"the benchmark's clients and upstream during the load rounds: {median(others.load_generator):.2f} cores "
        f"(max {max(others.load_generator):.2f}): near 1 per core they have, the load generator, not the target, "
        "sets the ITL tail"
    )
    print()
    print("goals (wall-clock ones hold only on a quiet machine; CPU per chunk is the load-proof one):")
    missed: list[str] = []

    def goal(name: str, value: float, limit: float, text: str) -> str:
        ok = value == value and value <= limit
        if not ok:
            missed.append(name)
        return f"{text} {'ok' if ok else 'MISSED'}"

    def decided(name: str, value: float, lo: float, hi: float, limit: float, text: str) -> str:
        """A goal met or missed only when its 95% interval is on one side of the limit (with too few rounds for an
        interval, by the point value alone); undecided counts as not met."""
        if lo == lo and lo <= limit < hi:
            missed.append(f"{name} (undecided)")
            return f"{text} UNDECIDED"
        return goal(name, value, limit, text)

    def itl_goal(name: str, t: Target, limit: float) -> str:
        value, lo, hi = pooled_over(t.itl_rounds, bare.itl_rounds, 99)
        if len(t.itl_rounds) < 6:
            lo = hi = float("nan")
        text = f"ITL p99 over bare {value:+.3f} ms (<= +{limit}; pooled, 95% CI {_ms(lo)}..{_ms(hi)})"
        return decided(name, value, lo, hi, limit, text)

    def median_goal(name: str, values: list[float], limit: float, what: str, unit: str) -> str:
        """A goal on the median of per-round paired values, with the median's distribution-free 95% interval."""
        value, (lo, hi) = median(values), median_ci(values)
        fmt = (lambda v: f"{v:.2f}x") if unit == "x" else (lambda v: f"{v:+.3f} ms")
        bound = f"{limit:.2f}x" if unit == "x" else f"+{limit} ms"
        ci = f"95% CI {fmt(lo)}..{fmt(hi)}" if lo == lo else "too few rounds for an interval"
        return decided(name, value, lo, hi, limit, f"{what} {fmt(value)} (<= {bound}; median of rounds, {ci})")

    for t in targets[2:]:
        record = "record" in t.name
        limit = 0.3 if record else 0.1
        checks = [itl_goal(f"{t.name} ITL p99", t, limit)]
        if record:
            r50, r99 = rec_minus_client(t, 50), rec_minus_client(t, 99)
            checks += [
                goal(f"{t.name} recorded ITL p50", abs(r50), 0.1, f"rec-client ITL p50 {_ms(r50)} (|x| <= 0.1)"),
                goal(f"{t.name} recorded ITL p99", abs(r99), 0.5, f"p99 {_ms(r99)} (|x| <= 0.5)"),
                median_goal(f"{t.name} CPU/chunk", cpu_ratios(t), 1.10, "CPU/chunk over bare", "x"),
                median_goal(f"{t.name} TTFT", ttft_over_bare(t), 0.05, "TTFT over bare", "ms"),
            ]
        print(f"  {t.name:<28} " + "; ".join(checks))
    return missed


def attribution(probes: dict[str, dict[str, Any]]) -> None:
    """Where each bench proxy's loop stalls came from (benchmarks/proxy_probe.py), from the probed run."""
    print()
    print("attribution (--attribute; probed processes, so their own figures above are inflated):")
    for name, p in probes.items():
        s = p["stretch_ms"]
        c = p["stretch_cpu_ms"]
        print(
            f"  {name}: {p['stretches']} loop stretches, p50 {s['50']:.3f} p99 {s['99']:.3f} p99.9 {s['99.9']:.3f} "
            f"max {s['100']:.3f} ms; stretches >= 0.5/1/2/5 ms: {' / '.join(str(v) for v in p['over_ms'].values())}"
        )
        print(
            f"    their CPU time (load-proof): p50 {c['50']:.3f} p99 {c['99']:.3f} p99.9 {c['99.9']:.3f} "
            f"max {c['100']:.3f} ms; >= 0.5/1/2/5 ms of CPU: {' / '.join(str(v) for v in p['over_cpu_ms'].values())}"
        )
        g, w = p["gc_pause_ms"], p["writer_gil_hold_ms"]
        print(
            f"    gc: {p['gc_pauses']} collections, wall pause p50 {g['50']:.3f} p99 {g['99']:.3f} "
            f"max {g['100']:.3f} ms; "
            f"writer thread: {p['writer_batches']} batches (p50 {p['writer_records_per_batch_p50']:.0f} records), "
            f"GIL-holding Python per batch p50 {w['50']:.3f} p99 {w['99']:.3f} max {w['100']:.3f} ms"
        )
        gens = ", ".join(
            f"gen{g} {v['count']} (p50 {v['p50_ms']:.3f}, max {v['max_ms']:.3f} ms)"
            for g, v in p["gc_by_generation"].items()
        )
        print(f"    collections by generation (CPU time): {gens}; gc-tracked at exit {p['gc_tracked_objects_at_exit']}")
        print("    CPU time of one callback (the loop's work between two polls of its sockets), by what it ran:")
        for name, c in list(p["callback_cpu_ms"].items())[:8]:
            print(
                f"      {name}: {c['count']} callbacks, p50 {c['p50']:.3f} p99 {c['p99']:.3f} "
                f"p99.9 {c['p99.9']:.3f} max {c['max']:.3f} ms"
            )
        print("    time of the stretches of each length, by what ran (off CPU: of that time, the loop's thread waited")
        print("    for the GIL or was preempted by other processes):")
        for size, share in p["share_of_long_stretches_pct"].items():
            parts = ", ".join(f"{k} {v:.0f}%" for k, v in share.items() if k not in ("count", "off_cpu") and v >= 1)
            print(f"      {size} ({share['count']}): {parts}; off CPU {share['off_cpu']:.0f}%")


if __name__ == "__main__":
    sys.exit(main())
