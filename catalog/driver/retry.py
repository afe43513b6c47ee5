"""Which failed attempts are retried, and how long to wait before the next one."""

from __future__ import annotations

import random

from bench.catalog.driver.client import CONNECTION, EMPTY, HTTP_ERROR, OK, TIMEOUT, TRUNCATED, AttemptResult

RETRY_STATUSES = frozenset({408, 409, 429})


def retryable(result: AttemptResult, *, retry_timeouts: bool) -> bool:
    if result.kind == OK:
        return False
    if result.kind == HTTP_ERROR:
        return result.status is not None and (result.status in RETRY_STATUSES or result.status >= 500)
    if result.kind == TIMEOUT:
        return retry_timeouts
    return result.kind in (TRUNCATED, EMPTY, CONNECTION)


def backoff_delay(
    attempt: int, retry_after: float | None, *, base: float, cap: float, rng: random.Random | None = None
) -> float:
    """Exponential backoff with jitter (half fixed, half random, so retries of a burst spread out), never shorter
    than the server's Retry-After."""
    step = min(cap, base * 2.0 ** max(0, attempt - 1))
    r = rng.random() if rng is not None else random.random()
    delay = step / 2 + r * step / 2
    if retry_after is not None:
        delay = max(delay, retry_after)
    return delay
