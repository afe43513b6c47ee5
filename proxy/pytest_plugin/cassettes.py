"""A test's cassette on disk: whether it is stale, and committing a new recording without ever losing one.

A recording is written to a temporary file beside the cassette (its name has the process id: each pytest-xdist
worker writes its own) and moved into place at the end of the test, under an exclusive lock on the folder, so no two
writers ever share a file and a test killed halfway leaves the previous cassette as it was. The new exchanges replace
the old cassette, except when they must join it: in `new_episodes` mode, and when this same run already wrote that
cassette (two tests naming one cassette, possibly on two workers).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec

from bench.core.cassette import CassetteReader, CassetteWriter
from bench.core.cassette.records import Exchange, Header
from bench.core.errors import BenchError
from bench.proxy.error_responses import ERROR_HEADER

# Exchanges a replay served (in new_episodes mode, `auto` records those too) are not new recordings.
REPLAYED = "replay"


class Committed(msgspec.Struct, frozen=True):
    """What a commit kept: the new exchanges, and bench's own error answers it dropped (no upstream answered)."""

    recorded: int = 0
    own_errors: int = 0


def own_error(record: Exchange) -> bool:
    """An answer bench's proxy made itself (its 502/504 when the upstream failed or could not be reached, marked
    with ERROR_HEADER): what the upstream would have said is unknown, so it is never a recording."""
    marker = ERROR_HEADER.lower()
    return any(name.lower() == marker for name, _ in record.response.headers)


def error_answers(records: list[Exchange]) -> list[str]:
    """The requests whose last answer in `records` is an error the upstream sent (status >= 400), one
    `STATUS on METHOD PATH` each: replayed, they give a test the error again on every run."""
    last: dict[str, Exchange] = {}
    for record in records:
        if record.mode != REPLAYED and not own_error(record):
            last[record.request.fp or record.id] = record
    return [
        f"{r.response.status} on {r.request.method} {r.request.path}"
        for r in last.values()
        if r.response.status is not None and r.response.status >= 400
    ]


class Stale(msgspec.Struct, frozen=True):
    cassette: str
    why: str


def digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    except OSError as exc:
        raise BenchError(f"bench depends_on: cannot read {path}: {exc.strerror}; fix the path in the marker") from None


def depends_on_digests(names: tuple[str, ...], root: Path) -> dict[str, str]:
    return {name: digest(root / name) for name in names}


def recorded_at_us(header: Header) -> int:
    """When the cassette's oldest exchange was recorded (a merge keeps the first recording's time)."""
    first = header.run.first_recorded_us
    return first if isinstance(first, int) else header.created_us


def staleness(cassette: Path, header: Header, *, max_age_s: float | None, depends_on: dict[str, str]) -> Stale | None:
    """Why a cassette should be recorded again, or None: too old, or recorded against other prompt/catalog files."""
    if max_age_s is not None:
        age = time.time() - recorded_at_us(header) / 1e6
        if age > max_age_s:
            return Stale(str(cassette), f"recorded {age / 86400:.1f} days ago (bench_max_age {max_age_s / 86400:g}d)")
    recorded = header.run.depends_on or {}
    for name, now in depends_on.items():
        then = recorded.get(name)
        if then is None:
            return Stale(str(cassette), f"recorded before it depended on {name}")
        if then != now:
            return Stale(str(cassette), f"recorded with another version of {name}")
    return None


def partial_path(cassette: Path, worker: str) -> Path:
    """Where a test records before its cassette is committed; never matched by `*.cassette` globs."""
    return cassette.with_name(f".{cassette.name}.{worker}-{os.getpid()}.partial")


@contextlib.contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """An exclusive lock on a folder (all processes of the machine): one commit into it at a time."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _read(path: Path) -> tuple[Header, list[Exchange]]:
    reader = CassetteReader(path)
    return reader.header, list(reader)


def commit(partial: Path, cassette: Path, *, join: bool, session: str) -> Committed:
    """Move what the test recorded into its cassette; returns how many new exchanges it holds now (and how many of
    bench's own error answers were left out). `join` keeps the old exchanges (new_episodes); a cassette this run
    already wrote (`session`) is always joined, never replaced."""
    header, records = _read(partial)
    recorded = [r for r in records if r.mode != REPLAYED]
    new = [r for r in recorded if not own_error(r)]
    dropped = len(recorded) - len(new)
    if not new:
        partial.unlink()
        return Committed(0, dropped)
    with folder_lock(cassette.parent):
        old_header: Header | None = None
        old: list[Exchange] = []
        if cassette.exists():
            existing_header, existing = _read(cassette)
            if join or existing_header.run.session == session:
                old_header, old = existing_header, existing
        if old_header is None and len(new) == len(records):
            os.replace(partial, cassette)  # the partial file is the cassette as it stands
            return Committed(len(new), dropped)
        merged = cassette.with_name(partial.name + ".merged")
        run = header.run
        if old_header is not None:
            run = msgspec.structs.replace(run, first_recorded_us=recorded_at_us(old_header))
        with CassetteWriter(merged, settings=header.settings, run=run, redactor=None) as writer:
            for n, record in enumerate([*old, *new], start=1):
                record.id = f"x{n}"  # ids name exchanges in messages: unique again after joining
                writer.put(record)
        os.replace(merged, cassette)
        partial.unlink()
        return Committed(len(new), dropped)
