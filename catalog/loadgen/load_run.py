"""A whole `bench load` run: start the recording proxy, run each level in turn (a sweep decides its later levels
from its first two), say how each went, and close the cassette.

The generator shares the process, and so the core, with the proxy, as `bench record` does: what it can sustain is
measured with the proxy recording (docs/load.md, "The generator's ceiling").
"""

from __future__ import annotations

import asyncio
import datetime as dt
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

from bench import __version__
from bench.catalog.driver.config import RecordConfig
from bench.catalog.driver.conversation import Sender
from bench.catalog.driver.record_run import Interrupts, new_run_id
from bench.catalog.loadgen.arrivals import offsets
from bench.catalog.loadgen.levels import Bounds, Level, sweep_rates
from bench.catalog.loadgen.runner import LevelRun, run_closed, run_open
from bench.catalog.loadgen.sender import Dispatcher
from bench.catalog.loadgen.work import LoadRequest, Work
from bench.catalog.model import Catalog
from bench.core.cassette.records import LoadMeta, RunMeta
from bench.core.errors import BenchError

# A level whose arrivals were sent this much late at p99 (or whose sent rate fell 2% short of the asked one) says
# the generator fell behind: its figures then measure the generator as well as the upstream.
LATE_WARN_MS = 10.0
RATE_SHORT = 0.98


@dataclass
class LoadConfig:
    upstream: str
    models: list[str]
    levels: str  # rate | concurrency | sweep | synchronous | throughput | replay
    values: list[float] = field(default_factory=list)  # the rates or concurrencies; the sweep's size; the speed
    api_key: str | None = field(default=None, repr=False)
    workload: str = "catalog"
    source: str | None = None
    arrival: str = "poisson"
    burstiness: float = 1.0
    max_concurrency: int | None = None
    throughput_concurrency: int = 64
    bounds: Bounds = field(default_factory=Bounds)
    drain_s: float = 60.0
    request_timeout: float = 600.0
    out: str = "cassettes"
    seed: int = 0
    stream: bool = True
    slo: dict[str, float] = field(default_factory=dict)

    def public(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("api_key")
        data["api_key_set"] = self.api_key is not None
        data["bounds"] = {
            "duration_s": self.bounds.duration_s,
            "requests": self.bounds.requests,
            "warmup": str(self.bounds.warmup),
            "cooldown": str(self.bounds.cooldown),
        }
        return data

    def describe_levels(self) -> str:
        if self.levels in ("rate", "concurrency"):
            return f"{self.levels} {','.join(f'{v:g}' for v in self.values)}"
        if self.levels == "sweep":
            return f"sweep {int(self.values[0])}"
        if self.levels == "replay":
            return f"replay x{self.values[0]:g}"
        return self.levels


@dataclass
class LoadSummary:
    run_id: str
    cassette: Path | None = None
    levels: list[LevelRun] = field(default_factory=list)
    interrupted: bool = False
    warnings: list[str] = field(default_factory=list)


def load_meta(cfg: LoadConfig) -> LoadMeta:
    closed = cfg.levels in ("concurrency", "synchronous", "throughput")
    b = cfg.bounds
    return LoadMeta(
        workload=cfg.workload,
        source=cfg.source,
        arrival="replay" if cfg.levels == "replay" else ("closed" if closed else cfg.arrival),
        burstiness=cfg.burstiness if cfg.arrival == "gamma" else None,
        levels=cfg.describe_levels(),
        duration_s=b.duration_s,
        requests=b.requests,
        warmup=None if b.warmup.none else str(b.warmup),
        cooldown=None if b.cooldown.none else str(b.cooldown),
        max_concurrency=cfg.max_concurrency,
        seed=cfg.seed,
        slo=dict(cfg.slo),
    )


def run_metadata(run_id: str, cfg: LoadConfig, catalog: Catalog | None) -> RunMeta:
    tests = {t.id: t.hash for t in catalog.tests.values()} if catalog is not None else None
    return RunMeta(
        id=run_id,
        driver="bench load",
        config=cfg.public(),
        catalog_hash=catalog.hash if catalog is not None else None,
        tests=tests,
        bench_version=__version__,
        started=dt.datetime.now(dt.UTC).isoformat(),
        load=load_meta(cfg),
    )


class Plan:
    """The levels in order; a sweep's rates come from what its synchronous and throughput levels achieved."""

    def __init__(self, cfg: LoadConfig) -> None:
        self.cfg = cfg
        self.rates: list[float] = []

    def levels(self, done: list[LevelRun]) -> Iterator[Level]:
        cfg = self.cfg
        if cfg.levels in ("rate", "concurrency"):
            yield from (Level(i, cfg.levels, v) for i, v in enumerate(cfg.values))
        elif cfg.levels == "synchronous":
            yield Level(0, "synchronous", 1)
        elif cfg.levels == "throughput":
            yield Level(0, "throughput", cfg.throughput_concurrency)
        elif cfg.levels == "replay":
            yield Level(0, "replay", cfg.values[0])
        elif cfg.levels == "sweep":
            yield Level(0, "synchronous", 1)
            yield Level(1, "throughput", cfg.throughput_concurrency)
            low, high = done[0].request_rate(), done[1].request_rate()
            if low <= 0 or high <= 0:
                raise BenchError("the sweep's synchronous or throughput level completed no request: nothing to sweep")
            self.rates = sweep_rates(low, high, int(cfg.values[0]))
            yield from (Level(2 + i, "rate", r) for i, r in enumerate(self.rates))
        else:
            raise BenchError(f"unknown levels {cfg.levels!r}")


def lateness_ms(run: LevelRun) -> tuple[float, float, float] | None:
    late = [s.late_s for s in run.sent if s.late_s is not None]
    if not late:
        return None
    p50, p99 = np.percentile(np.asarray(late) * 1000, [50, 99])
    return float(p50), float(p99), max(late) * 1000


def describe(run: LevelRun) -> tuple[str, str | None]:
    """One line on how a level went, and a warning when the generator fell behind."""
    measured = run.measured()
    ok = sum(1 for s in measured if s.ok)
    errors: dict[str, int] = {}
    for s in measured:
        if not s.ok:
            errors[s.error or "failed"] = errors.get(s.error or "failed", 0) + 1
    phases = f"{len(run.sent)} sent, {len(measured)} measured"
    line = f"level {run.level.index} {run.level.label}: {phases}, {ok} ok, {run.request_rate():.2f} req/s"
    if errors:
        line += " (failed: " + ", ".join(f"{k} x{n}" for k, n in sorted(errors.items())) + ")"
    warning = None
    late = lateness_ms(run)
    if late is not None:
        line += f", send lateness p50 {late[0]:.2f} ms p99 {late[1]:.2f} ms"
        short = _sent_rate_short(run)
        if late[1] > LATE_WARN_MS or short:
            why = f"send lateness p99 {late[1]:.1f} ms, max {late[2]:.1f} ms" + (f"; {short}" if short else "")
            warning = (
                f"level {run.level.index} {run.level.label}: the generator fell behind its schedule ({why}): "
                "its figures measure the generator as well as the upstream"
            )
    if run.cancelled:
        line += f", {run.cancelled} cut at the drain limit"
    if run.exhausted:
        line += ", the workload ran out"
    return line, warning


def _sent_rate_short(run: LevelRun) -> str | None:
    if run.level.kind != "rate" or len(run.sent) < 3:
        return None
    starts = sorted(s.start for s in run.sent)
    span = starts[-1] - starts[0]
    sent = (len(starts) - 1) / span if span > 0 else float("inf")
    # Poisson and gamma gaps are random: only a constant rate has a sent rate the asked one must match.
    if sent < RATE_SHORT * run.level.value and run.arrival == "constant":
        return f"sent {sent:.2f}/s of {run.level.value:g}/s asked"
    return None


async def run_level(
    level: Level, cfg: LoadConfig, work: Iterator[Work], dispatcher: Dispatcher, stop: asyncio.Event
) -> LevelRun:
    if level.kind == "rate":
        due = offsets(cfg.arrival, level.value, burstiness=cfg.burstiness, seed=cfg.seed + level.index)
        return await run_open(
            level, cfg.bounds, due, work, dispatcher.send,
            max_concurrency=cfg.max_concurrency, drain_s=cfg.drain_s, stop=stop, arrival=cfg.arrival,
        )  # fmt: skip
    if level.kind == "replay":
        items = list(work)
        times = [(w.at_us or 0) / 1e6 / level.value if isinstance(w, LoadRequest) else 0.0 for w in items]
        return await run_open(
            level, cfg.bounds, iter(times), iter(items), dispatcher.send,
            max_concurrency=cfg.max_concurrency, drain_s=cfg.drain_s, stop=stop, arrival="replay",
            length_s=times[-1] if times else 0.0,
        )  # fmt: skip
    return await run_closed(level, cfg.bounds, work, dispatcher.send, drain_s=cfg.drain_s, stop=stop)


def dispatcher_for(
    cfg: LoadConfig, session: aiohttp.ClientSession, proxy_url: str, run_id: str, catalog: Catalog | None
) -> Dispatcher:
    """What sends the run's work through the proxy; catalog jobs go through the recording driver's conversation
    loop, with no retries (under load a retry would be an arrival nobody scheduled)."""
    catalog_sender = None
    if catalog is not None:
        record_cfg = RecordConfig(
            upstream=cfg.upstream, models=cfg.models, max_retries=0, stream=cfg.stream,
            request_timeout=cfg.request_timeout, idle_timeout=cfg.request_timeout, out=cfg.out,
        )  # fmt: skip
        catalog_sender = Sender(session=session, url=f"{proxy_url}/v1", run_id=run_id, cfg=record_cfg)
    return Dispatcher(session, proxy_url, run_id, cfg.request_timeout, catalog_sender)


async def _levels(
    cfg: LoadConfig, work: Iterator[Work], dispatcher: Dispatcher, stop: asyncio.Event, summary: LoadSummary,
    say: Callable[[str], None],
) -> None:  # fmt: skip
    for level in Plan(cfg).levels(summary.levels):
        if stop.is_set():
            return
        run = await run_level(level, cfg, work, dispatcher, stop)
        summary.levels.append(run)
        line, warning = describe(run)
        say(line)
        if warning:
            say(f"bench load: warning: {warning}")
            summary.warnings.append(warning)
        if run.sent and not any(s.ok for s in run.sent):
            raise BenchError(f"{line}: every request failed; check --upstream, --model and the workload")


async def run_load(
    cfg: LoadConfig,
    work: Iterator[Work],
    *,
    catalog: Catalog | None = None,
    handle_signals: bool = False,
    log: Callable[[str], None] | None = None,
) -> LoadSummary:
    """Run every level through a recording proxy of its own; the cassette is closed whatever happens."""
    from bench.proxy import start_proxy

    say = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    summary = LoadSummary(new_run_id())
    proxy = await start_proxy(
        upstream=cfg.upstream, cassettes=Path(cfg.out), mode="record", run=run_metadata(summary.run_id, cfg, catalog),
        upstream_key=cfg.api_key, request_timeout=cfg.request_timeout,
    )  # fmt: skip
    summary.cassette = proxy.cassette_path
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0), trust_env=False, timeout=aiohttp.ClientTimeout(total=None)
    )
    main = asyncio.current_task()
    assert main is not None
    first = "\nbench load: stopping: no new requests, waiting for those in flight; press Ctrl-C again to quit now"
    interrupts = Interrupts(main, lambda: say(first), proxy.hurry)
    if handle_signals:
        interrupts.install()
    try:
        dispatcher = dispatcher_for(cfg, session, proxy.url, summary.run_id, catalog)
        await _levels(cfg, work, dispatcher, interrupts.stop, summary, say)
    except asyncio.CancelledError:
        main.uncancel()  # the second Ctrl-C: the cassette must still be closed below
        summary.interrupted = True
    finally:
        interrupts.remove()
        summary.interrupted = summary.interrupted or interrupts.stop.is_set()
        await session.close()
        await proxy.close(interrupted=summary.interrupted, grace=0.0 if summary.interrupted else 10.0)
    return summary
