"""Where a proxy process's event-loop stalls come from: loaded into `bench proxy` by `proxy_overhead.py --attribute`.

Measures, in the proxy process, each busy stretch of its event loop (from one return of the selector to its next
call) and splits it by what ran: the handlers and connections forwarding bytes, the task building records
(`Persister._run`), the cassette writer's wake-ups of waiting responses, new connections, garbage collection, and the
time the loop's thread was off the CPU while busy (waiting for the GIL the cassette writer's thread held, or
preempted by other processes on a loaded machine). It also times the writer thread's GIL-holding Python work per
batch (everything but compression, which releases the GIL) and each collection's pause. Summary written as JSON at
exit. It costs a few clock reads per callback: figures from a probed run are for attribution, not for the overhead
table (the benchmark measures those in a run without it).
"""

from __future__ import annotations

import asyncio
import atexit
import gc
import inspect
import json
import os
import selectors
import threading
import time
from collections import Counter
from typing import Any

# Busy stretches at least this long are itemized (shorter ones only counted in the histogram).
ITEMIZE_NS = 200_000


class Probe:
    def __init__(self, out: str) -> None:
        self.out = out
        self.woke = time.monotonic_ns()
        self.woke_cpu = time.thread_time_ns()
        self.parts: Counter[str] = Counter()  # ns per category in the current stretch
        self.gc_in_callback = 0  # wall time of the collections during the current callback
        self.gc_cpu_in_callback = 0  # and their CPU time
        self.gc_start = 0
        self.gc_start_cpu = 0
        self.stretches: list[int] = []
        self.stretch_cpu: list[int] = []  # the loop thread's CPU time in each stretch: load-proof, unlike its length
        self.itemized: list[dict[str, int]] = []
        self.gc_pauses: list[int] = []
        self.gc_by_generation: dict[int, list[int]] = {0: [], 1: [], 2: []}  # CPU time of each pause (ns)
        self.callback_cpu: dict[str, list[int]] = {}  # CPU time (ns, less gc) of each callback, by category
        self.writer_holds: list[int] = []  # GIL-holding Python per writer batch (ns)
        self.writer_batches: list[int] = []  # records per batch
        self.main = threading.get_ident()

    # -- the loop --------------------------------------------------------------------------------------------

    def polled(self) -> None:
        """Called as the loop enters its selector: the busy stretch since it last returned ends here."""
        now = time.monotonic_ns()
        busy = now - self.woke
        cpu = time.thread_time_ns() - self.woke_cpu
        self.stretches.append(busy)
        self.stretch_cpu.append(cpu)
        if busy >= ITEMIZE_NS:
            parts = dict(self.parts)
            parts["loop's own work"] = max(0, busy - sum(parts.values()))
            parts["total"] = busy
            parts["off_cpu"] = max(0, busy - cpu)
            self.itemized.append(parts)
        self.parts.clear()

    def returned(self) -> None:
        self.woke = time.monotonic_ns()
        self.woke_cpu = time.thread_time_ns()

    def gc_event(self, phase: str, info: dict[str, Any]) -> None:
        if threading.get_ident() != self.main:
            return
        now = time.monotonic_ns()
        cpu = time.thread_time_ns()
        if phase == "start":
            self.gc_start, self.gc_start_cpu = now, cpu
        elif self.gc_start:
            pause = now - self.gc_start
            self.gc_pauses.append(pause)
            self.gc_by_generation[info["generation"]].append(cpu - self.gc_start_cpu)
            self.parts["gc"] += pause
            self.gc_in_callback += pause
            self.gc_cpu_in_callback += cpu - self.gc_start_cpu
            self.gc_start = 0

    def dump(self) -> None:
        def pct(values: list[int], p: float) -> float:
            if not values:
                return 0.0
            s = sorted(values)
            return s[min(len(s) - 1, int(len(s) * p / 100))] / 1e6

        by_size: dict[str, dict[str, float]] = {}
        for low, high in ((0.2, 0.5), (0.5, 1.0), (1.0, 2.0), (2.0, 1e9)):
            group = [p for p in self.itemized if low * 1e6 <= p["total"] < high * 1e6]
            if not group:
                continue
            total: Counter[str] = Counter()
            for p in group:
                total.update(p)
            name = f"{low:g}-{high:g} ms" if high < 1e9 else f">= {low:g} ms"
            by_size[name] = (
                {"count": len(group)}
                | {
                    k: round(v / total["total"] * 100, 1)
                    for k, v in total.most_common()
                    if k not in ("total", "off_cpu")
                }
                | {"off_cpu": round(total["off_cpu"] / total["total"] * 100, 1)}
            )
        summary = {
            "stretches": len(self.stretches),
            "stretch_ms": {p: pct(self.stretches, p) for p in (50, 99, 99.9, 100)},
            "stretch_cpu_ms": {p: pct(self.stretch_cpu, p) for p in (50, 99, 99.9, 100)},
            "over_cpu_ms": {f">= {t}": sum(s >= t * 1e6 for s in self.stretch_cpu) for t in (0.5, 1, 2, 5)},
            "over_ms": {f">= {t}": sum(s >= t * 1e6 for s in self.stretches) for t in (0.5, 1, 2, 5)},
            "share_of_long_stretches_pct": by_size,
            "callback_cpu_ms": {
                k: {"count": len(v), "p50": pct(v, 50), "p99": pct(v, 99), "p99.9": pct(v, 99.9), "max": pct(v, 100)}
                for k, v in sorted(self.callback_cpu.items(), key=lambda kv: -sum(kv[1]))
                if len(v) >= 10
            },
            "gc_pauses": len(self.gc_pauses),
            "gc_pause_ms": {p: pct(self.gc_pauses, p) for p in (50, 99, 100)},
            "gc_by_generation": {
                g: {"count": len(v), "p50_ms": pct(v, 50), "max_ms": pct(v, 100)}
                for g, v in self.gc_by_generation.items()
            },
            "gc_tracked_objects_at_exit": len(gc.get_objects()),
            "writer_batches": len(self.writer_holds),
            "writer_records_per_batch_p50": pct(self.writer_batches, 50) * 1e6,
            "writer_gil_hold_ms": {p: pct(self.writer_holds, p) for p in (50, 99, 100)},
        }
        with open(self.out, "w") as f:
            json.dump(summary, f, indent=1)


def _category(handle: asyncio.Handle) -> str:
    callback = getattr(handle, "_callback", None)
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, asyncio.Task):
        name = owner.get_coro().__qualname__  # type: ignore[union-attr]
        if name == "Persister._run":
            return "record building (Persister._run)"
        if "accept" in name or name == "RequestHandler.start":
            return "connections (accept, request loop)"
        if name == "RequestHandler._handle_request" and inspect.getcoroutinestate(owner.get_coro()) == "CORO_CREATED":
            # A handler's first step: everything it does before it first waits, the upstream request sent.
            return "handler start (to the upstream request)"
        return "forwarding (handler tasks)"
    name = getattr(callback, "__qualname__", "")
    if name == "_settle":
        return "writer wake-ups (_settle)"
    if "accept" in name:
        return "connections (accept, request loop)"
    if "_read_ready" in name or "write" in name:
        return "forwarding (socket reads/writes)"
    return f"other ({name or type(callback).__name__})"


def install(out: str, writer: bool = True) -> None:
    """Probe this process; `writer=False` for a process without a cassette writer (the bare pass-through)."""
    probe = Probe(out)
    threshold = os.environ.get("PROXY_PROBE_GC_THRESHOLD")  # e.g. 10000,10,10: try other collector thresholds
    if threshold:
        gc.set_threshold(*(int(v) for v in threshold.split(",")))
    run = asyncio.events.Handle._run

    def timed_run(self: asyncio.Handle) -> None:
        t0 = time.monotonic_ns()
        category = _category(self)  # before it runs: a handler's first step is told by its coroutine's state
        t = time.monotonic_ns()
        probe.parts["the probe itself"] += t - t0  # else its own cost would read as the loop's
        c = time.thread_time_ns()
        probe.gc_in_callback = probe.gc_cpu_in_callback = 0
        run(self)
        cpu = time.thread_time_ns() - c
        probe.parts[category] += time.monotonic_ns() - t - probe.gc_in_callback
        probe.callback_cpu.setdefault(category, []).append(cpu - probe.gc_cpu_in_callback)

    asyncio.events.Handle._run = timed_run  # type: ignore[method-assign]

    select = selectors.EpollSelector.select

    def timed_select(self: selectors.EpollSelector, timeout: float | None = None) -> Any:
        if threading.get_ident() == probe.main:
            probe.polled()
            ready = select(self, timeout)
            probe.returned()
            return ready
        return select(self, timeout)

    selectors.EpollSelector.select = timed_select  # type: ignore[method-assign]

    from asyncio import selector_events

    process_events = getattr(selector_events.BaseSelectorEventLoop, "_process_events")  # noqa: B009 (private)

    def timed_process_events(self: Any, event_list: Any) -> None:
        t = time.monotonic_ns()
        process_events(self, event_list)
        probe.parts["loop: ready sockets queued"] += time.monotonic_ns() - t

    setattr(selector_events.BaseSelectorEventLoop, "_process_events", timed_process_events)  # noqa: B010
    gc.callbacks.append(probe.gc_event)
    atexit.register(probe.dump)
    if writer:
        _probe_writer(probe)


def _probe_writer(probe: Probe) -> None:
    from bench.core.cassette import columns, writer

    payload_parts, prefix, write_now = columns.payload_parts, writer.prefix, writer.CassetteWriter._write_now
    held = threading.local()

    def timed_parts(*args: Any) -> Any:
        t = time.thread_time_ns()
        try:
            return payload_parts(*args)
        finally:
            held.ns = getattr(held, "ns", 0) + time.thread_time_ns() - t

    def timed_prefix(*args: Any) -> Any:
        t = time.thread_time_ns()
        try:
            return prefix(*args)
        finally:
            held.ns = getattr(held, "ns", 0) + time.thread_time_ns() - t

    def timed_write_now(self: Any, batch: list[Any], end_frame: bool = False) -> None:
        held.ns = 0
        try:
            write_now(self, batch, end_frame)
        finally:
            probe.writer_holds.append(held.ns)
            probe.writer_batches.append(len(batch))

    columns.payload_parts = timed_parts  # type: ignore[assignment]
    writer.prefix = timed_prefix  # type: ignore[assignment]
    writer.CassetteWriter._write_now = timed_write_now  # type: ignore[method-assign]
