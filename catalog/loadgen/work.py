"""What a load run sends: a workload is an iterator of typed work items, from a source registered by name.

A `LoadRequest` is one HTTP request, sent byte for byte; a `CatalogJob` is a catalog test's conversation (its turns
follow the model's answers, and the run is scored). A source is a function registered with `@workload_source`, whose
signature is its declaration: it takes the run's `SourceOptions` and returns an iterable of work. A source that
keeps a recorded schedule (replayed traffic, imported traces) sets `at_us` on its requests; the others leave arrival
times to the load level.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from bench.catalog.driver.conversation import Job
    from bench.catalog.model import Catalog


class LoadRequest(msgspec.Struct, frozen=True, gc=False):
    """One request to send as it is: `path` (with its query) under the upstream's root, the exact body bytes."""

    path: str
    body: bytes
    method: str = "POST"
    # Headers sent with it besides the load's own tags (a replayed request's recorded ones that are safe to resend).
    headers: tuple[tuple[str, str], ...] = ()
    # Its place in a recorded schedule: microseconds after the workload's first request (None: the level decides).
    at_us: int | None = None
    origin: str = ""  # where it came from, for messages: "CASSETTE#x17", "FILE:12", "synthetic:3"
    model: str | None = None


@dataclass(frozen=True)
class CatalogJob:
    """A catalog test's conversation for one model and epoch (bench.catalog.driver.conversation.run_job sends it)."""

    job: Job


Work = LoadRequest | CatalogJob


@dataclass(frozen=True)
class SourceOptions:
    """What every source may use; each reads the fields it needs."""

    arg: str | None = None  # the source's argument as given: a file, cassettes, synthetic lengths
    models: tuple[str, ...] = ()
    stream: bool = True
    seed: int = 0
    catalog: Catalog | None = None
    suites: tuple[str, ...] = ()
    tests: tuple[str, ...] = ()
    tokenizer: str | None = None  # a GGUF file whose tokenizer makes synthetic prompts exact
    max_tokens: int | None = None
    extra: dict[str, str] = field(default_factory=dict)


WorkloadFn = Callable[[SourceOptions], Iterable[Work]]


@dataclass(frozen=True)
class WorkloadSource:
    name: str
    build: WorkloadFn
    scheduled: bool  # its requests carry a recorded schedule (at_us) that the run follows
    help: str


SOURCES: dict[str, WorkloadSource] = {}


def workload_source(name: str, *, scheduled: bool = False, help: str = "") -> Callable[[WorkloadFn], WorkloadFn]:
    """Register a workload source under `name` (what `bench load` records as `run.load.workload`)."""

    def register(fn: WorkloadFn) -> WorkloadFn:
        if name in SOURCES:
            raise RuntimeError(f"workload source {name!r} registered twice")
        SOURCES[name] = WorkloadSource(name, fn, scheduled, help or (fn.__doc__ or "").strip().split("\n")[0])
        return fn

    return register
