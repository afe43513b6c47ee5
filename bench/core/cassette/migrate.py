"""Upgrading records written by older format versions to the current one.

MIGRATIONS[n] turns a version-n record into a version-(n+1) record. Readers apply them in order, so code past the
reader only ever sees the current version. `bench cassette upgrade` rewrites a file in the current version.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.core.cassette.format import FORMAT_VERSION

Record = dict[str, Any]


def _v1_to_v2(record: Record) -> Record:
    # v2 changed the layout (a header frame, framed and checksummed records, the arrival-time column), not the
    # fields: the reader undoes the layout, so a v1 record read is already a v2 record.
    return record


MIGRATIONS: dict[int, Callable[[Record], Record]] = {1: _v1_to_v2}


def upgrade(record: Record, version: int) -> Record:
    while version < FORMAT_VERSION:
        record = MIGRATIONS[version](record)
        version += 1
    return record
