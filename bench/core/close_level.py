"""BENCH_CLOSE_LEVEL: the zstd level a closed cassette is recompressed at (bench.core.cassette.compact), read without
importing the cassette code (the pytest plugin checks it when pytest starts)."""

from __future__ import annotations

import os
from typing import Literal

from bench.core.errors import BenchError

# Overrides CLOSE_LEVELS' level for every size they recompress: a zstd level (1-22), `off` (kept as written) or
# `auto` (the default). A machine short of CPU at close, or a test suite, trades 10-25% of size for seconds of CPU.
CLOSE_LEVEL_ENV = "BENCH_CLOSE_LEVEL"


def close_level_setting() -> Literal["auto"] | int | None:
    """BENCH_CLOSE_LEVEL read: "auto", None (off) or a level; BenchError naming the fix if it is none of them."""
    value = os.environ.get(CLOSE_LEVEL_ENV, "").strip().lower()
    if value in ("", "auto"):
        return "auto"
    if value == "off":
        return None
    if value.isdigit() and 1 <= int(value) <= 22:
        return int(value)
    raise BenchError(f"{CLOSE_LEVEL_ENV}={value[:20]!r} is not a zstd level: set it to 1-22, off or auto")
