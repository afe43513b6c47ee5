"""The catalog as a workload: every selected test for every model, over and over (each pass a new epoch, so that
each conversation is its own result), in a seeded order. Every answer is scored by `bench rescore`."""

from __future__ import annotations

import random
from collections.abc import Iterator

from bench.catalog.driver.conversation import Job
from bench.catalog.loadgen.work import CatalogJob, SourceOptions, Work, workload_source
from bench.catalog.model import TestSpec
from bench.core.errors import BenchError


@workload_source("catalog", help="the catalog's tests (every answer scored)")
def catalog_work(options: SourceOptions) -> Iterator[Work]:
    catalog = options.catalog
    if catalog is None:
        raise BenchError("the catalog workload needs a catalog (bench load loads the built-in one by default)")
    if not options.models:
        raise BenchError("the catalog workload needs a model: pass --model M (repeatable)")
    unknown = [t for t in options.tests if t not in catalog.tests]
    if unknown:
        raise BenchError(f"unknown test id(s): {', '.join(unknown)}; list them with `bench catalog ls`")
    tests = catalog.select(list(options.suites) or None, list(options.tests) or None)
    if not tests:
        raise BenchError("no tests selected; check --suite and --tests")
    return _jobs(tests, options.models, options.seed)


def _jobs(tests: list[TestSpec], models: tuple[str, ...], seed: int) -> Iterator[Work]:
    rng = random.Random(seed)
    epoch = 0
    while True:
        jobs = [Job(test, model, epoch) for test in tests for model in models]
        rng.shuffle(jobs)
        for job in jobs:
            yield CatalogJob(job)
        epoch += 1
