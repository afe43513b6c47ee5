"""What the idle timeout costs a request's start: a timer per exchange (made, pushed on the loop's heap, cancelled
when the exchange ends) against bench.proxy.watchdog's shared sweep (the exchange added to a set and taken out), side by
side in interleaved rounds of 256 exchanges starting together, as a burst of requests does.

    .venv/bin/python benchmarks/idle_watch.py [--rounds 40]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.proxy.watchdog import IdleSweep
from tests.support.records import live_exchange

BURST = 256


def _nothing() -> None:
    pass


async def _rounds(rounds: int) -> tuple[list[float], list[float]]:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    sweep = IdleSweep(300.0)
    timers: list[float] = []
    shared: list[float] = []
    for _ in range(rounds):
        exchanges = [live_exchange(time.monotonic_ns(), body=b"") for _ in range(BURST)]
        t = time.perf_counter_ns()
        handles = [loop.call_later(300.0, _nothing) for _ in exchanges]
        for handle in handles:
            handle.cancel()
        await asyncio.sleep(0)
        timers.append((time.perf_counter_ns() - t) / BURST / 1e3)
        t = time.perf_counter_ns()
        watches = [sweep.watch(ex, task) for ex in exchanges]
        for watch in watches:
            watch.stop()
        await asyncio.sleep(0)
        shared.append((time.perf_counter_ns() - t) / BURST / 1e3)
    if sweep.handle is not None:
        sweep.handle.cancel()
    return timers, shared


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    timers, shared = asyncio.run(_rounds(args.rounds))
    ratio = statistics.median(a / b for a, b in zip(timers, shared, strict=True))
    print(
        f"per exchange, {BURST} starting together, {args.rounds} interleaved rounds (median): timer per exchange "
        f"{statistics.median(timers):.2f} us, shared sweep {statistics.median(shared):.2f} us: {ratio:.1f}x less"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
