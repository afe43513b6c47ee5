"""Upgrading records written by older format versions to the current one.

MIGRATIONS[n] turns a version-n record into a version-(n+1) record. Readers apply them in order, so code past the
reader only ever sees the current version. Version 1 is the first: the table is empty, the path is in place.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.cassette.format import FORMAT_VERSION

Record = dict[str, Any]

MIGRATIONS: dict[int, Callable[[Record], Record]] = {}


def upgrade(record: Record, version: int) -> Record:
    while version < FORMAT_VERSION:
        record = MIGRATIONS[version](record)
        version += 1
    return record
