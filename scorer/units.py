"""Where a rescore's units run: in this process, in a pool of forked workers, or on a Dask cluster; outputs come back
with their unit's index as units finish.

Large cassettes are split into shards when there are too few cassettes to keep every job busy. A forked worker gets
the catalog and options once, when it starts (`_start_worker`, this module's own state in that process), not with
every unit.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any

from bench.catalog.model import Catalog
from bench.core import storage
from bench.core.cassette.runs import group_runs
from bench.scorer import progress, unit_scoring
from bench.scorer.unit_scoring import Options, Unit, UnitOutput, score_unit
from bench.workspace import sandbox

SHARD_MIN_BYTES = 32 << 10
# Cassettes fetched ahead from object storage by an in-process rescore: each is held whole until its unit runs, so
# this many cassettes' compressed bytes is the memory it costs.
PREFETCH = 4
# Units submitted to the pool ahead of the ones running: keeps workers busy while finished outputs wait to be read.
AHEAD_PER_WORKER = 2


def plan_units(files: Sequence[storage.Location], jobs: int) -> list[Unit]:
    """(cassette, shard, shards, the run's other cassettes): a run recorded by several workers is one unit (its
    conversations can span its shards: bench.core.cassette.runs); large ones are split when there are too few to keep
    every job busy."""
    runs = group_runs(files)
    shards_each = 1
    if jobs > 1 and len(runs) < 2 * jobs:
        shards_each = jobs
    units: list[Unit] = []
    for run in runs:
        n = shards_each if sum(storage.size(path) for path in run.files) >= SHARD_MIN_BYTES else 1
        units.extend(Unit(run.first, i, n, run.files[1:]) for i in range(n))
    return units


def run_units(
    files: list[storage.Location], catalog: Catalog, options: Options, *, jobs: int = 1, dask: str | None = None
) -> Iterator[tuple[int, UnitOutput]]:
    """(unit index, output) for every unit, as units finish. At most a few units per worker are submitted ahead, so
    finished outputs waiting to be consumed stay few. When a command asked for it (bench.scorer.progress), the
    work's progress is shown as it goes."""
    shown = progress.start(len(files))
    try:
        if dask is not None:
            outputs = _on_dask(dask, files, catalog, options)
        else:
            units = plan_units(files, max(1, jobs))
            if jobs <= 1 or len(units) <= 1:
                unit_scoring.tick = None if shown is None else shown.read
                outputs = _in_process(units, catalog, options)
            else:
                outputs = _in_pool(units, catalog, options, min(jobs, len(units)), shown)
        for i, output in outputs:
            if shown is not None and (output.cassettes or output.warnings):
                shown.unit_done()  # the unit that opens a cassette (its first shard) reports it read or unreadable
            yield i, output
    finally:
        unit_scoring.tick = None
        if shown is not None:
            shown.close()


def _in_process(units: list[Unit], catalog: Catalog, options: Options) -> Iterator[tuple[int, UnitOutput]]:
    # Cassettes on object storage are fetched a few ahead while one is scored (see storage.Prefetch).
    remote = [str(u.location) for u in units if storage.is_url(u.location)]
    with storage.prefetching(PREFETCH if remote else 0) as ahead:
        for i, unit in enumerate(units):
            if ahead is not None:
                ahead.want([str(u.location) for u in units[i : i + 1 + PREFETCH] if storage.is_url(u.location)])
            yield i, score_unit(unit, catalog, options)


# In a forked worker: the catalog and options every unit of the run is scored with (set by _start_worker).
_worker: tuple[Catalog, Options] | None = None


def _start_worker(catalog: Catalog, options: Options, slots: Any, read: Any) -> None:
    global _worker
    _worker = catalog, options
    sandbox.set_semaphore(slots)
    if read is not None:  # the shared count of exchanges read, for the progress

        def tick(n: int) -> None:
            with read.get_lock():
                read.value += n

        unit_scoring.tick = tick


def _score_in_worker(unit: Unit) -> UnitOutput:
    assert _worker is not None, "a pool worker starts with _start_worker"
    return score_unit(unit, *_worker)


def _in_pool(
    units: list[Unit], catalog: Catalog, options: Options, workers: int, shown: progress.ScoreProgress | None = None
) -> Iterator[tuple[int, UnitOutput]]:
    # Forked: the workers share the loaded catalog instead of unpickling it; sandboxed programs share one semaphore of
    # the machine's cores across them.
    ctx = multiprocessing.get_context("fork")
    slots = ctx.BoundedSemaphore(max(1, os.cpu_count() or 1))
    read = ctx.Value("q", 0) if shown is not None else None
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=ctx, initializer=_start_worker, initargs=(catalog, options, slots, read)
    ) as pool:
        todo = iter(enumerate(units))
        pending: dict[Future[UnitOutput], int] = {}
        for i, unit in itertools.islice(todo, AHEAD_PER_WORKER * workers):
            pending[pool.submit(_score_in_worker, unit)] = i
        while pending:
            done, _ = wait(pending, timeout=None if shown is None else 0.5, return_when=FIRST_COMPLETED)
            if shown is not None and read is not None:
                shown.read_total(read.value)
            for future in done:
                i = pending.pop(future)
                for j, unit in itertools.islice(todo, 1):
                    pending[pool.submit(_score_in_worker, unit)] = j
                yield i, future.result()


def _on_dask(
    spec: str, files: list[storage.Location], catalog: Catalog, options: Options
) -> Iterator[tuple[int, UnitOutput]]:
    from bench.scorer import distributed

    distributed.import_distributed()  # a missing extra is reported before the files are planned
    with distributed.connect(spec) as client:
        units = distributed.resolve_local(plan_units(files, distributed.workers_of(client)))
        yield from distributed.iter_units(client, units, catalog, options)
