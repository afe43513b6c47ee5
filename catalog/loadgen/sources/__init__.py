"""The built-in workload sources, registered with `@workload_source` when imported (bench.catalog.loadgen.work);
a new source is a module here, imported below."""

from bench.catalog.loadgen.sources import catalog_work, dataset, replay_traffic, synthetic
from bench.catalog.loadgen.work import SOURCES, WorkloadSource
from bench.core.errors import BenchError

__all__ = ["catalog_work", "dataset", "replay_traffic", "source", "synthetic"]


def source(name: str) -> WorkloadSource:
    found = SOURCES.get(name)
    if found is None:
        raise BenchError(f"unknown workload source {name!r}; known: {', '.join(sorted(SOURCES))}")
    return found
