"""Files of traffic recorded by other tools, read as imported exchanges (bench.core.imported): the workload a load
run sends on the recorded schedule, and what `bench catalog from-traffic` drafts tests from.

Each file's kind is told from its first JSON value: a document (or a line) with `resourceSpans` is OTLP JSON
(bench.core.otlp_traces), anything else a request log (bench.core.request_logs), whose lines are each checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import msgspec

from bench.core import otlp_traces, request_logs
from bench.core.errors import BenchError
from bench.core.imported import ImportedExchange, json_lines


def imported_exchanges(paths: Iterable[Path]) -> list[ImportedExchange]:
    """Every exchange of these files (each an OTLP JSON trace file or a request log), in the order they started,
    `at_us` counted from the first that has a time (those without one come last, in file order, `at_us` None)."""
    paths = list(paths)
    found: list[ImportedExchange] = []
    for path in paths:
        lines = json_lines(Path(path))
        first = next(lines, None)
        if first is None:
            continue
        values = _chain(first, lines)
        is_otlp = isinstance(first[1], dict) and "resourceSpans" in first[1]
        found.extend(otlp_traces.exchanges(path, values) if is_otlp else request_logs.exchanges(path, values))
    if not found:
        where = ", ".join(str(p) for p in paths)
        raise BenchError(f"{where}: no LLM requests in it (GenAI spans or OpenAI request bodies)")
    timed = [e.started_us for e in found if e.started_us is not None]
    zero = min(timed) if timed else 0
    found.sort(key=lambda e: (e.started_us is None, e.started_us or 0))
    return [msgspec.structs.replace(e, at_us=None if e.started_us is None else e.started_us - zero) for e in found]


def _chain(first: tuple[int, object], rest: Iterator[tuple[int, object]]) -> Iterator[tuple[int, object]]:
    yield first
    yield from rest
