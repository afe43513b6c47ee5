"""`bench rescore --dask ADDRESS|local[:N]`: the process pool's units as Dask tasks (docs/scale.md).

Each task reads its cassette itself (a path every worker can open, or an fsspec URL), so only unit descriptions go
out and only slimmed results come back. The catalog and options are sent to every worker once (scattered), not with
each task. Results are collected as they finish, each with its unit's index, so the scores file is assembled in
unit order exactly as a local run's and is byte-identical. A task that raises is retried once (`retries=1`); a worker
that dies is rescheduled by the scheduler; a unit whose scattered inputs died with every worker holding them is sent
again with them; a unit that still fails is named in the error, never dropped.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from bench.catalog.model import Catalog
from bench.core import storage
from bench.core.errors import BenchError
from bench.scorer.unit_scoring import Options, Unit, UnitOutput, score_unit

UnitFn = Callable[[Unit, Catalog, Options], UnitOutput]

LOCAL = "local"
# A worker lost twice while running the same unit means the unit kills workers (memory, a crash): fail it then, with
# its name, rather than after the scheduler's default of three lost workers.
ALLOWED_FAILURES = 1
CONNECT_TIMEOUT_S = 20
# A unit whose scattered inputs were lost with the workers holding them is sent again with them, up to this many
# times: workers restarted by their nannies can be lost again before the new copies land (seen on a loaded machine).
RESENDS = 3
LOOPBACK = "127.0.0.1"
# `--dask local`: the scheduler's and workers' HTTP servers (which a LocalCluster starts whatever its dashboard
# setting) get no routes: no dashboard, metrics or proxy for anyone on the machine to reach.
QUIET_HTTP: dict[str, list[str]] = {"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": []}


def import_distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise BenchError(
            "--dask needs the dask extra (the `distributed` package): pip install 'llm-gateway-bench[dask]'"
        ) from None
    return distributed


def parse_local(spec: str) -> int | None:
    """`local` -> 0 (one worker per core), `local:N` -> N; anything else is a scheduler address (None)."""
    if spec == LOCAL:
        return 0
    if spec.startswith(LOCAL + ":"):
        count = spec[len(LOCAL) + 1 :]
        if not count.isdigit() or int(count) < 1:
            raise BenchError(f"--dask {spec}: give local:N with N a positive number of workers")
        return int(count)
    return None


@contextlib.contextmanager
def connect(spec: str) -> Iterator[Any]:
    """A Dask client: on a new LocalCluster of separate worker processes (one thread each: scoring holds the GIL),
    or on the scheduler at `spec`."""
    distributed = import_distributed()

    workers = parse_local(spec)
    if workers is not None:
        with local_client(workers) as client:
            yield client
        return
    try:
        client = distributed.Client(spec, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError, ValueError) as exc:
        raise BenchError(
            f"--dask {spec}: cannot reach a Dask scheduler there ({type(exc).__name__}); "
            "start one (`dask scheduler`) or give local[:N]"
        ) from None
    with client:
        yield client


@contextlib.contextmanager
def local_client(workers: int) -> Iterator[Any]:
    """A client on a new LocalCluster of `workers` separate processes (0: one per core), one thread each (scoring
    holds the GIL), listening on the loopback interface only."""
    distributed = import_distributed()
    import dask

    with (
        dask.config.set({"distributed.scheduler.allowed-failures": ALLOWED_FAILURES, **QUIET_HTTP}),
        distributed.LocalCluster(
            n_workers=workers or None,
            threads_per_worker=1,
            processes=True,
            host=LOOPBACK,
            dashboard_address=None,
            # The scheduler always starts an HTTP server; dashboard_address=None alone leaves it on port 8787
            # (the dashboard's, taken from any other cluster on the machine). Here it serves nothing (no
            # routes, no dashboard) on a free port of the loopback interface.
            scheduler_kwargs={"dashboard": False, "dashboard_address": f"{LOOPBACK}:0"},
            silence_logs=40,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


def workers_of(client: Any) -> int:
    """Threads across the cluster's workers: how many units can run at once (for plan_units)."""
    threads: int = sum(client.nthreads().values())
    return max(1, threads)


def unit_name(unit: Unit) -> str:
    path, shard, shards, more = unit
    run = f" and {len(more)} more cassette(s) of its run" if more else ""
    return f"{path}{run}" if shards == 1 else f"{path}{run} (shard {shard + 1} of {shards})"


def score_remote(unit: Unit, catalog: Catalog, options: Options) -> UnitOutput:
    """Runs on a worker: the same function the process pool runs."""
    return score_unit(unit, catalog, options)


def run_units(
    client: Any,
    units: Sequence[Unit],
    catalog: Catalog,
    options: Options,
    fn: UnitFn = score_remote,
) -> list[UnitOutput]:
    """Every unit's output in unit order; BenchError naming each unit that failed twice."""
    outputs: list[UnitOutput | None] = [None] * len(units)
    for i, output in iter_units(client, units, catalog, options, fn):
        outputs[i] = output
    return [o for o in outputs if o is not None]


def iter_units(
    client: Any,
    units: Sequence[Unit],
    catalog: Catalog,
    options: Options,
    fn: UnitFn = score_remote,
) -> Iterator[tuple[int, UnitOutput]]:
    """(unit index, output) as units finish; after the last, BenchError naming each unit that failed twice (the
    caller writes nothing until the iteration ends, so a failed unit is never silently missing)."""
    distributed = import_distributed()

    def scatter() -> list[Any]:
        # Every worker needs the catalog and options: sent once each, not pickled into every task.
        return list(client.scatter([catalog, options], broadcast=True, hash=False))

    shared = scatter()
    futures = [client.submit(fn, unit, *shared, retries=1, pure=False) for unit in units]
    index = {f.key: i for i, f in enumerate(futures)}
    resent = [0] * len(units)
    failed: list[str] = []
    running = distributed.as_completed(futures)
    for future in running:
        i = index[future.key]
        if future.status == "finished":
            output = future.result()
            future.release()
            yield i, output
        elif future.status not in ("error", "cancelled"):
            # It finished, then the worker holding its result died before it was fetched: the scheduler computes it
            # again (its status back to pending), so it is waited for again, not counted as failed.
            running.add(future)
        else:
            exc = future.exception()
            future.release()
            if exc is None and resent[i] < RESENDS:
                # No error of its own: what it needed is gone. Scattered data lives only on the workers that were
                # running when it was sent; if every one of them has died, the units that need it cannot run again.
                # Sent again (once per loss), and the unit with it (up to RESENDS times).
                if any(s.status != "finished" for s in shared):
                    shared = scatter()
                again = client.submit(fn, units[i], *shared, retries=1, pure=False)
                index[again.key] = i
                resent[i] += 1
                running.add(again)
            else:
                failed.append(f"{unit_name(units[i])}: {type(exc).__name__}: {_one_line(exc)}")
    if failed:
        raise BenchError(
            f"{len(failed)} unit(s) failed twice on the Dask cluster, nothing written: " + "; ".join(sorted(failed))
        )


def _one_line(exc: BaseException | None) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else "no message"


def resolve_local(units: Sequence[Unit]) -> list[Unit]:
    """Local paths made absolute: a worker's working directory need not be the coordinator's."""

    def local(p: storage.Location) -> storage.Location:
        return p.resolve() if isinstance(p, Path) else p

    return [Unit(local(p), s, n, tuple(local(m) for m in more)) for p, s, n, more in units]
