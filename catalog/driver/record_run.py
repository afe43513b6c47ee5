"""A whole `bench record` run: select jobs, check the gateway, start the proxy, dispatch, stop cleanly."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp

from bench import __version__
from bench.catalog.driver.config import RecordConfig
from bench.catalog.driver.conversation import Job, JobResult, Sender, run_job
from bench.catalog.driver.limiter import Limiter
from bench.catalog.driver.preflight import api_base, preflight
from bench.catalog.driver.progress import Quiet, Reporter
from bench.catalog.driver.resume import missing_jobs, read_run
from bench.catalog.driver.server_info import read_server
from bench.catalog.model import Catalog, TestSpec
from bench.core.cassette.records import RunMeta
from bench.core.errors import BenchError

if TYPE_CHECKING:
    from bench.proxy.server import RunningProxy

# The driver abandons a silent stream itself (idle_timeout); its in-process proxy shares the event loop and would cut
# the same stream at the same moment, so which of the two acted (a timeout or a cut-short answer) was a race. The
# proxy's limit sits this much later, so the driver's own watchdog always decides and the proxy is only a backstop.
PROXY_IDLE_GRACE_S = 1.0


@dataclass
class RecordSummary:
    run_id: str
    cassette: Path | None
    jobs: int
    done: int = 0
    errors: int = 0
    requests: int = 0
    retries: int = 0
    interrupted: bool = False
    elapsed: float = 0.0
    skipped_complete: int = 0
    failures: list[str] = field(default_factory=list)
    cancelled: bool = False  # the second Ctrl-C cut the jobs in flight off

    def count(self, job: Job, result: JobResult) -> None:
        self.done += 1
        self.requests += result.requests
        self.retries += result.retries
        if not result.ok:
            self.errors += 1
            self.failures.append(f"{job.test.id} {job.model} epoch {job.epoch}: {result.error}")


def new_run_id() -> str:
    return f"r-{dt.datetime.now(dt.UTC).strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"


def select_tests(catalog: Catalog, cfg: RecordConfig) -> list[TestSpec]:
    unknown = [t for t in cfg.tests if t not in catalog.tests]
    if unknown:
        raise BenchError(f"unknown test id(s): {', '.join(unknown)}; list them with `bench catalog ls`")
    suites = {t.suite for t in catalog.tests.values()}
    bad = [s for s in cfg.suites if s not in suites]
    if bad:
        raise BenchError(f"unknown suite(s): {', '.join(bad)}; known suites: {', '.join(sorted(suites))}")
    categories = {t.category for t in catalog.tests.values()}
    bad = [c for c in cfg.categories if c not in categories]
    if bad:
        raise BenchError(f"unknown categor(y/ies): {', '.join(bad)}; known: {', '.join(sorted(categories))}")
    tests = catalog.select(cfg.suites or None, cfg.tests or None, cfg.categories or None)
    if not tests:
        raise BenchError("no tests selected; check --suite, --category and --tests (a test must match all three)")
    _sandbox_ready(tests)
    return tests


def _sandbox_ready(tests: list[TestSpec]) -> None:
    """Tests whose model may run commands need the code sandbox: refuse the run before anything is sent, rather than
    run a model's commands unsandboxed or fail each call later."""
    if not any(t.workspace is not None and t.workspace.allow_commands for t in tests):
        return
    from bench.workspace import sandbox

    problem = sandbox.unavailable()
    if problem is not None:
        raise BenchError(f"{problem} (workspace tests run the model's commands in it; or leave them out with --suite)")


def make_jobs(tests: list[TestSpec], models: list[str], epochs: int) -> list[Job]:
    # Models interleaved, so that a slow model's queue never holds back the others' first results.
    return [Job(t, m, e) for e in range(epochs) for t in tests for m in models]


def run_metadata(
    run_id: str, cfg: RecordConfig, catalog: Catalog, tests: list[TestSpec], resumed_from: list[str] | None
) -> RunMeta:
    return RunMeta(
        id=run_id,
        driver="bench record",
        config=cfg.public(),
        catalog_hash=catalog.hash,
        tests={t.id: t.hash for t in tests},
        bench_version=__version__,
        started=dt.datetime.now(dt.UTC).isoformat(),
        resumed_from=resumed_from,
    )


class Interrupts:
    """First Ctrl-C: stop dispatching and let in-flight jobs finish. Second: cancel everything now."""

    def __init__(self, task: asyncio.Task[Any], on_first: Callable[[], None], on_second: Callable[[], None]) -> None:
        self.task = task
        self.stop = asyncio.Event()
        self.count = 0
        self._on_first = on_first
        self._on_second = on_second
        self._installed = False

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        asyncio.get_running_loop().add_signal_handler(signal.SIGINT, self.fire)
        self._installed = True

    def remove(self) -> None:
        if self._installed:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGINT)

    def fire(self) -> None:
        self.count += 1
        if self.count == 1:
            self.stop.set()
            self._on_first()
        elif self.count == 2:
            self._on_second()
            self.task.cancel()
        else:
            os._exit(130)  # a third Ctrl-C: the user insists; the cassette is readable up to its last block


async def record(
    cfg: RecordConfig,
    catalog: Catalog,
    *,
    resume: str | None = None,
    reporter: Reporter | None = None,
    handle_signals: bool = False,
    log: Callable[[str], None] | None = None,
) -> RecordSummary:
    say = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    plan = _plan(cfg, catalog, resume)
    summary = RecordSummary(plan.run_id, None, len(plan.jobs), skipped_complete=plan.skipped)
    if not plan.jobs:
        return summary
    target = cfg.proxy or cfg.upstream
    assert target is not None
    if cfg.upstream is not None:
        from bench.proxy.server import public_url

        public_url(cfg.upstream)  # credentials in it are refused before the preflight could send them
    await preflight(target, cfg.api_key, cfg.models)
    proxy, url, auth = await _recording_proxy(cfg, catalog, plan, target)
    summary.cassette = proxy.cassette_path if proxy is not None else None
    connector = aiohttp.TCPConnector(limit=0)
    session = aiohttp.ClientSession(connector=connector, trust_env=False, timeout=aiohttp.ClientTimeout(total=None))
    sender = Sender(session=session, url=url, run_id=plan.run_id, cfg=cfg, auth=auth, say=say)
    t0 = time.monotonic()
    try:
        await _run_jobs(plan.jobs, sender, cfg, summary, reporter or Quiet(), proxy, handle_signals, say)
    finally:
        await session.close()
        if proxy is not None:
            await proxy.close(interrupted=summary.interrupted, grace=0.0 if summary.cancelled else 10.0)
        summary.elapsed = time.monotonic() - t0
    return summary


@dataclass
class _Plan:
    run_id: str
    tests: list[TestSpec]
    jobs: list[Job]
    resumed_from: list[str] | None = None
    skipped: int = 0


def _plan(cfg: RecordConfig, catalog: Catalog, resume: str | None) -> _Plan:
    """The run's tests and jobs; resuming, only the jobs the run's cassettes do not hold a complete recording of."""
    tests = select_tests(catalog, cfg)
    jobs = make_jobs(tests, cfg.models, cfg.epochs)
    plan = _Plan(resume or new_run_id(), tests, jobs)
    if resume is not None:
        meta, files, by_job = read_run(Path(cfg.out), resume)
        _check_hashes(meta, tests)
        plan.jobs = missing_jobs(jobs, by_job, cfg.max_retries, cfg.retry_timeouts)
        plan.skipped = len(jobs) - len(plan.jobs)
        plan.resumed_from = [p.name for p in files]
    return plan


async def _recording_proxy(
    cfg: RecordConfig, catalog: Catalog, plan: _Plan, target: str
) -> tuple[RunningProxy | None, str, str | None]:
    """(the in-process recording proxy, or None for a proxy the user runs; the base URL to send to; the key the
    driver sends itself)."""
    if cfg.proxy is not None:
        return None, f"{api_base(cfg.proxy)}/v1", cfg.api_key
    from bench.proxy import start_proxy

    # What serves the run, as the engine describes itself: stored in the header, compared by `bench compare`.
    server = await read_server(target, cfg.api_key, cfg.models)
    proxy = await start_proxy(
        upstream=cfg.upstream,
        cassettes=Path(cfg.out),
        mode="record",
        run=run_metadata(plan.run_id, cfg, catalog, plan.tests, plan.resumed_from),
        server=server,
        upstream_key=cfg.api_key,
        idle_timeout=cfg.idle_timeout + PROXY_IDLE_GRACE_S if cfg.stream else None,
    )
    return proxy, f"{proxy.url}/v1", None  # the in-process proxy adds the upstream key itself


async def _run_jobs(
    jobs: list[Job],
    sender: Sender,
    cfg: RecordConfig,
    summary: RecordSummary,
    reporter: Reporter,
    proxy: RunningProxy | None,
    handle_signals: bool,
    say: Callable[[str], None],
) -> None:
    """Every job, as many at once as the limits allow; the first Ctrl-C lets the jobs in flight finish, the second
    cuts them off (the proxy still closes its cassette)."""
    limiter = Limiter(cfg.concurrency, cfg.model_concurrency)
    main = asyncio.current_task()
    assert main is not None
    in_flight = 0

    def first() -> None:
        say(f"\nbench record: stopping: letting {in_flight} in-flight job(s) finish; press Ctrl-C again to quit now")

    def second() -> None:
        if proxy is not None:
            proxy.hurry()

    interrupts = Interrupts(main, first, second)
    if handle_signals:
        interrupts.install()

    async def one(job: Job) -> JobResult | None:
        nonlocal in_flight
        async with limiter.slot(job.model):
            if interrupts.stop.is_set():
                return None
            in_flight += 1
            try:
                result = await run_job(sender, job)
            finally:
                in_flight -= 1
        summary.count(job, result)
        reporter.advance(result.ok)
        return result

    reporter.start(len(jobs))
    try:
        await asyncio.gather(*(one(j) for j in jobs))
    except asyncio.CancelledError:
        summary.cancelled = True
        main.uncancel()  # the second Ctrl-C is handled here: closing the cassette below must still run
    finally:
        reporter.stop()
        interrupts.remove()
        summary.interrupted = summary.cancelled or interrupts.stop.is_set()


def _check_hashes(meta: RunMeta, tests: list[TestSpec]) -> None:
    recorded = meta.tests or {}
    changed = [t.id for t in tests if t.id in recorded and recorded[t.id] != t.hash]
    if changed:
        raise BenchError(
            f"the catalog changed since this run was recorded ({', '.join(changed[:5])}); "
            "resuming would mix versions: start a new run"
        )
