"""`bench record --resume RUN`: what the cassettes of a run already hold, and which jobs are still missing.

A job is complete when its recorded exchanges reach the point where the driver would have stopped: the same rules
(retries, tool loops, limits) applied to the recorded answers. A job cut off mid-way is recorded again whole.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from bench.catalog.driver.client import OK, AttemptResult, judge
from bench.catalog.driver.conversation import Job, should_continue
from bench.catalog.driver.retry import retryable
from bench.catalog.model import TestSpec
from bench.core.cassette import CassetteReader, find_cassettes
from bench.core.cassette.records import Exchange, RunMeta
from bench.core.errors import BenchError
from bench.core.parse import parse_exchange

JobKey = tuple[str, str, int]


def read_run(out_dir: Path, run_id: str) -> tuple[RunMeta, list[Path], dict[JobKey, list[Exchange]]]:
    """The run metadata of the run's first cassette, its cassette files, and its exchanges by job."""
    if not out_dir.is_dir():
        raise BenchError(f"{out_dir}: no such folder; pass the --out folder that holds run {run_id}")
    meta: RunMeta | None = None
    files: list[Path] = []
    by_job: dict[JobKey, list[Exchange]] = defaultdict(list)
    for path in find_cassettes([out_dir]):
        try:
            reader = CassetteReader(path)
        except BenchError as exc:
            print(f"bench: warning: {exc}; skipped", file=sys.stderr)  # what it held is recorded again
            continue
        run = reader.header.run
        if run.id != run_id:
            continue
        files.append(path)
        if meta is None or run.resumed_from is None:
            meta = run
        for record in reader:
            tags = record.tags
            if tags.get("run") != run_id:
                continue
            try:
                key = (str(tags["test"]), str(tags["model"]), int(tags["epoch"]))
            except (KeyError, ValueError):
                continue
            by_job[key].append(record)
        if reader.damaged:
            print(f"bench: warning: {reader.problem}; what it lost is recorded again", file=sys.stderr)
    if meta is None:
        raise BenchError(f"no cassette of run {run_id} in {out_dir}; check the run id (bench cassette ls) and --out")
    return meta, files, by_job


def job_complete(test: TestSpec, records: Iterable[Exchange], max_retries: int, retry_timeouts: bool) -> bool:
    by_turn: dict[int, list[tuple[int, Exchange]]] = defaultdict(list)
    for record in records:
        tags = record.tags
        try:
            by_turn[int(tags.get("turn", 0))].append((int(tags.get("attempt", 1)), record))
        except ValueError:
            continue
    calls = 0
    turn = 0
    while turn in by_turn:
        attempts = sorted(by_turn[turn], key=lambda pair: pair[0])
        last_attempt, last = attempts[-1]
        parsed = parse_exchange(last)
        kind = judge(parsed)
        if kind != OK:
            result = AttemptResult(kind, parsed.status, parsed)
            return last_attempt > max_retries or not retryable(result, retry_timeouts=retry_timeouts)
        if not should_continue(test, parsed, turn, calls):
            return True
        calls += len(parsed.tool_calls)
        turn += 1
    return False


def missing_jobs(
    jobs: list[Job], by_job: dict[JobKey, list[Exchange]], max_retries: int, retry_timeouts: bool
) -> list[Job]:
    return [j for j in jobs if not job_complete(j.test, by_job.get(j.key, ()), max_retries, retry_timeouts)]
