"""Where recording's own CPU per exchange goes: each step of the record-building task (bench.proxy.persist), timed on
the
exchange `benchmarks/proxy_overhead.py` sends (44 reads of ~240 bytes, a client key to scrub).

    .venv/bin/python benchmarks/record_steps.py                  # this tree's steps
    git archive main | tar -x -C /tmp/base && .venv/bin/python benchmarks/record_steps.py --baseline /tmp/base
                                                                 # before/after, side by side

Each source tree runs in its own process (two trees cannot share one), in interleaved rounds; every round builds the
same exchanges. Steps are timed in the thread's CPU time (a loaded machine inflates them little): p50 per step over
all exchanges, then the total per exchange and per read, and with --baseline the ratio of the totals.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from time import monotonic_ns, thread_time_ns
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# What each step of `Persister._steps` is, in order (a tree whose steps differ prints its own count).
STEP_NAMES = [
    "settle the outcome",
    "first token",
    "fingerprint: parse",
    "fingerprint: hash",
    "the record",
    "secrets where they stand",
    "reads searched",
    "rest packed and searched",
    "packing",
]


def measure(count: int) -> dict[str, Any]:
    """Build `count` records the way the proxy does; CPU ns per step (lists) and the reads per exchange."""
    sys.path.insert(0, str(HERE))
    import importlib

    import proxy_overhead as po

    # A tree from before the namespace move (issue 29) has the proxy at the top level.
    namespace = (Path.cwd() / "bench" / "proxy").is_dir()
    cassette = importlib.import_module("bench.core.cassette" if namespace else "bench.cassette")
    CassetteWriter = cassette.CassetteWriter
    Persister = importlib.import_module("bench.proxy.persist" if namespace else "proxy.persist").Persister
    recorder = importlib.import_module("bench.proxy.recorder" if namespace else "proxy.recorder")
    Exchange = recorder.Exchange

    po._VOCAB = po._vocabulary()

    class Stats:
        exchanges = 0
        lost = 0

    def exchange(seed: int) -> Exchange:
        body = json.dumps(po.request_body(seed, po.TOKENS, 0, 25)).encode()
        headers = [
            ["Host", "127.0.0.1:8000"],
            ["Authorization", po.AUTH["Authorization"]],
            ["Accept", "*/*"],
            ["Accept-Encoding", "gzip, deflate"],
            ["User-Agent", "Python/3.11 aiohttp/3.9"],
            ["Content-Length", str(len(body))],
            ["Content-Type", "application/json"],
        ]
        t0 = monotonic_ns()
        answer = [
            ["Content-Type", "text/event-stream"],
            ["x-request-id", f"req_{seed}"],
            ["Date", "Tue, 01 Dec 2026 05:00:00 GMT"],
            ["Server", "Python/3.11 aiohttp/3.9"],
            ["Transfer-Encoding", "chunked"],
        ]
        start = {
            "t0": t0,
            "started_us": t0 // 1000,
            "mode": "record",
            "tags": {},
            "upstream_url": "http://127.0.0.1:8001",
        }
        if "request" in Exchange.__slots__:  # the live exchange holds its record's request and response head
            request = cassette.records.Request(method="POST", path="/v1/chat/completions", headers=headers, body=body)
            ex = Exchange(request=request, **start)
            ex.sent(t0 + 100_000)
            ex.answered(cassette.records.Response(status=200, headers=answer, streamed=True), t0 + 200_000, frozenset())
        else:
            request_fields = {"method": "POST", "path": "/v1/chat/completions", "query": "", "fp": ""}
            ex = Exchange(req_headers=headers, body=body, **request_fields, **start)
            ex.status, ex.resp_headers, ex.streamed = 200, answer, True
            ex.sent_upstream, ex.headers_at = t0 + 100_000, t0 + 200_000
        t = t0 + 1_000_000
        for read in po.stream_chunks(seed, po.TOKENS):
            t += 25_000_000
            ex.chunks.append(read)
            ex.times.append(t)
        return ex

    steps: list[list[int]] = []
    reads = 0
    with tempfile.TemporaryDirectory() as tmp, CassetteWriter(Path(tmp) / "steps.cassette") as writer:
        persister = Persister(writer, Stats())
        for i in range(count):
            ex = exchange(po.LOAD_SEED + i)
            reads = len(ex.chunks)
            packed: list[Any] = []
            run = persister._steps(ex, monotonic_ns(), packed)
            k = 0
            while True:
                a = thread_time_ns()
                try:
                    next(run)
                    ended = False
                except StopIteration:
                    ended = True
                b = thread_time_ns()
                if k == len(steps):
                    steps.append([])
                steps[k].append(b - a)
                if ended:
                    break
                k += 1
    # What timing a step costs by itself (two reads of the thread's CPU clock, a system call on some VMs): every step
    # above includes it, the proxy's steps do not.
    empty = []
    for _ in range(1000):
        a = thread_time_ns()
        b = thread_time_ns()
        empty.append(b - a)
    return {"steps": steps, "reads": reads, "clock": statistics.median(empty)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, metavar="SRC", help="also time another source tree, side by side")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--exchanges", type=int, default=300, help="per round and tree")
    parser.add_argument("--measure", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return 0
    trees = [("this tree", ROOT)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    steps: dict[str, list[list[int]]] = {name: [] for name, _ in trees}
    totals: dict[str, list[float]] = {name: [] for name, _ in trees}
    reads = 0
    clock: list[float] = []
    for r in range(args.rounds):
        for name, src in trees if r % 2 == 0 else trees[::-1]:
            code = (
                f"import sys; sys.path.insert(0, {str(src)!r}); sys.argv = ['x', '--measure', '{args.exchanges}']; "
                f"sys.path.insert(0, {str(HERE)!r}); import record_steps; record_steps.main()"
            )
            out = subprocess.run([sys.executable, "-c", code], cwd=src, capture_output=True, text=True, check=True)
            got = json.loads(out.stdout)
            reads = got["reads"]
            clock.append(got.get("clock", 0))
            for k, values in enumerate(got["steps"]):
                if k == len(steps[name]):
                    steps[name].append([])
                steps[name][k].extend(values)
            per_exchange = [sum(v) for v in zip(*got["steps"], strict=True)]
            totals[name].append(statistics.median(per_exchange) / 1000)
        print(f"  round {r + 1}/{args.rounds}", end="\r", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    print(f"record building, CPU us per step (p50 over {args.rounds} x {args.exchanges} exchanges of {reads} reads):")
    names = [name for name, _ in trees]
    print(f"  {'step':<28}" + "".join(f"{n:>12}" for n in names))
    for k in range(max(len(s) for s in steps.values())):
        label = STEP_NAMES[k] if k < len(STEP_NAMES) else f"step {k}"
        cells = "".join(
            f"{statistics.median(steps[n][k]) / 1000:>12.1f}" if k < len(steps[n]) else f"{'-':>12}" for n in names
        )
        print(f"  {label:<28}{cells}")
    print(f"  {'total per exchange':<28}" + "".join(f"{statistics.median(totals[n]):>12.1f}" for n in names))
    print(f"  {'total per read':<28}" + "".join(f"{statistics.median(totals[n]) / reads:>12.2f}" for n in names))
    tick = statistics.median(clock) / 1000
    count = len(steps[names[0]])
    print(
        f"each step's figure includes ~{tick:.1f} us of reading the thread's CPU clock ({count} steps per exchange "
        f"here: ~{tick * count:.0f} us of the total is the measuring, not the proxy's work)"
    )
    if args.baseline:
        ratios = [a / b for a, b in zip(totals["this tree"], totals["baseline"], strict=True)]
        print(f"this tree / baseline, per exchange: {statistics.median(ratios):.2f} (median of round ratios)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
