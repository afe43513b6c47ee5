"""What a cassette rotation costs the streams a proxy forwards: `bench proxy --mode record` with and without
`--rotate-every`, side by side under the same paced load (issue 13).

The paced mock upstream of benchmarks/proxy_overhead.py serves `--streams` concurrent streams of `--tokens` tokens,
one every 25 ms; each round sends them through both proxies, in random order. The client measures the gaps between
token reads (ITL); a rotation that held the proxy's loop would show as a gap longer than the pacing in the rotating
proxy's tail (p99, p99.9, max) against the other's in the same rounds. The rotating proxy's cassettes are counted
(rotations done) and every exchange is checked to be recorded once, whole.

    .venv/bin/python benchmarks/rotation_cost.py [--rounds 4] [--streams 64] [--tokens 120] [--every 0.5s]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import proxy_overhead as po  # noqa: E402

ITL_MS = 25.0


def proxy_argv(upstream: str, cassettes: Path, rotate: list[str]) -> list[str]:
    argv = ["bench", "proxy", "--port", "0", "--upstream", upstream, "--cassettes", str(cassettes), *rotate]
    code = f"import sys; sys.path.insert(0, {str(ROOT)!r}); sys.argv = {argv!r}; from bench.cli import main; main()"
    return [sys.executable, "-c", code]


async def one_round(url: str, seed: int, streams: int, tokens: int) -> list[float]:
    import aiohttp

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=300)) as s:
        bodies = [po.request_body(seed + i, tokens, 20, ITL_MS) for i in range(streams)]
        results = await asyncio.gather(*(po.one_stream(s, url, b) for b in bodies))
    gaps: list[float] = []
    for _, itl, data, _ in results:
        assert data.endswith(b"data: [DONE]\n\n"), "a stream was cut"
        gaps.extend(itl)
    return gaps


def count_records(folder: Path) -> tuple[int, int, list[int]]:
    """(cassettes, exchanges, each exchange's loop lag in us: the proxy's longest loop stall while it was in flight)."""
    from bench.core.cassette import CassetteReader

    files = sorted(folder.glob("*.cassette"))
    records = 0
    lags: list[int] = []
    for path in files:
        reader = CassetteReader(path)
        for record in reader:
            assert record.response.chunks[-1].endswith(b"data: [DONE]\n\n"), "a recorded stream is cut"
            records += 1
            lag = record.timing.loop_lag_us
            if lag is not None:
                lags.append(int(lag))
        assert not reader.truncated and reader.end is not None, path
    return len(files), records, lags


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=120)
    ap.add_argument("--every", default="0.5s")
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs: list[subprocess.Popen[str]] = []
    gaps: dict[str, list[float]] = {"no rotation": [], f"--rotate-every {args.every}": []}
    with tempfile.TemporaryDirectory(prefix="bench-rotation-") as tmp:
        folders = {name: Path(tmp) / f"c{i}" for i, name in enumerate(gaps)}
        try:
            up, upstream = po.start(
                [sys.executable, str(ROOT / "benchmarks" / "proxy_overhead.py"), "--serve-upstream"]
            )
            procs.append(up)
            urls: dict[str, str] = {}
            for name, folder in folders.items():
                rotate = ["--rotate-every", args.every] if name != "no rotation" else []
                proc, urls[name] = po.start(proxy_argv(upstream, folder, rotate), env)
                procs.append(proc)
            asyncio.run(one_round(urls["no rotation"], 1, 4, 8))  # warm-up: imports, pools
            for r in range(args.rounds):
                order = list(urls)
                random.shuffle(order)
                for name in order:
                    seed = 10_000 + r * args.streams
                    gaps[name].extend(asyncio.run(one_round(urls[name], seed, args.streams, args.tokens)))
                print(f"  round {r + 1}/{args.rounds}", end="\r", file=sys.stderr, flush=True)
            for proc in procs[1:]:
                proc.send_signal(signal.SIGINT)
                proc.wait(timeout=120)
            counted = {name: count_records(folder) for name, folder in folders.items()}
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
    load = os.getloadavg()[0]
    per_round = args.streams * args.rounds
    print(
        f"{args.rounds} interleaved rounds x {args.streams} streams x {args.tokens} tokens paced {ITL_MS:.0f} ms "
        f"(load average {load:.1f})"
    )
    base = gaps["no rotation"]
    for name, values in gaps.items():
        files, records, lags = counted[name]
        extra = {"p99": 99, "p99.9": 99.9}
        tail = ", ".join(f"{k} {po.pct(values, p) * 1e3:.1f} ms" for k, p in extra.items())
        print(
            f"{name:>22}: ITL p50 {po.pct(values, 50) * 1e3:.1f} ms, {tail}, max {max(values) * 1e3:.1f} ms; "
            f"{files} cassette(s), {records} of {per_round + 4 * (name == 'no rotation')} exchanges recorded"
        )
        if lags:
            print(
                f"{'':>22}  proxy loop stall per exchange (recorded): p50 {po.pct(lags, 50) / 1e3:.1f} ms, "
                f"p99 {po.pct(lags, 99) / 1e3:.1f} ms, max {max(lags) / 1e3:.1f} ms"
            )
    rot = gaps[f"--rotate-every {args.every}"]
    diff: dict[str, Any] = {p: (po.pct(rot, p) - po.pct(base, p)) * 1e3 for p in (50, 99, 99.9)}
    print("rotating - not: " + ", ".join(f"p{p:g} {v:+.1f} ms" for p, v in diff.items()))


if __name__ == "__main__":
    main()
