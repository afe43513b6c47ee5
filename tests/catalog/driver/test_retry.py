"""Which failed attempts the driver retries, how long it waits, and what the server's Retry-After asks for."""

from __future__ import annotations

import email.utils
import random
from datetime import UTC, datetime

import pytest

from bench.catalog.driver import client
from bench.catalog.driver.client import CONNECTION, EMPTY, HTTP_ERROR, OK, TIMEOUT, TRUNCATED, AttemptResult
from bench.catalog.driver.retry import backoff_delay, retryable


@pytest.mark.parametrize(
    ("kind", "status", "retry_timeouts", "retried"),
    [
        (OK, 200, True, False),
        (HTTP_ERROR, 408, False, True),
        (HTTP_ERROR, 409, False, True),
        (HTTP_ERROR, 429, False, True),
        (HTTP_ERROR, 500, False, True),
        (HTTP_ERROR, 503, False, True),
        (HTTP_ERROR, 599, False, True),
        (HTTP_ERROR, 400, False, False),
        (HTTP_ERROR, 401, False, False),
        (HTTP_ERROR, 404, False, False),
        (HTTP_ERROR, 499, False, False),
        (HTTP_ERROR, None, False, False),
        (TIMEOUT, None, False, False),
        (TIMEOUT, None, True, True),
        (TRUNCATED, 200, False, True),
        (EMPTY, 200, False, True),
        (CONNECTION, None, False, True),
        ("something-else", 200, True, False),
    ],
)
def test_what_is_retried(kind: str, status: int | None, retry_timeouts: bool, retried: bool) -> None:
    assert retryable(AttemptResult(kind, status), retry_timeouts=retry_timeouts) is retried


class Fixed(random.Random):
    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def random(self) -> float:
        return self.value


@pytest.mark.parametrize(
    ("attempt", "r", "want"),
    [
        (1, 0.0, 0.5),  # step base * 2^0 = 1: half fixed, half random
        (1, 1.0, 1.0),
        (2, 0.0, 1.0),  # step 2
        (3, 0.5, 3.0),  # step 4: 2 + 0.5 * 2
        (0, 0.0, 0.5),  # attempts below 1 count as the first
        (10, 0.0, 5.0),  # step capped at 10
        (10, 1.0, 10.0),
    ],
)
def test_backoff_is_exponential_jittered_and_capped(attempt: int, r: float, want: float) -> None:
    assert backoff_delay(attempt, None, base=1.0, cap=10.0, rng=Fixed(r)) == pytest.approx(want)


def test_backoff_never_shorter_than_retry_after() -> None:
    assert backoff_delay(1, 7.5, base=1.0, cap=10.0, rng=Fixed(0.0)) == 7.5
    assert backoff_delay(1, 0.1, base=1.0, cap=10.0, rng=Fixed(0.0)) == 0.5
    assert backoff_delay(1, 40.0, base=1.0, cap=10.0, rng=Fixed(1.0)) == 40.0  # the server's wait beats the cap
    delays = {backoff_delay(3, None, base=1.0, cap=10.0) for _ in range(50)}
    assert len(delays) > 1 and all(2.0 <= d <= 4.0 for d in delays)  # unseeded: jittered within the step


def test_retry_after_ms_seconds_and_http_date(monkeypatch: pytest.MonkeyPatch) -> None:
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    monkeypatch.setattr(client.time, "time", lambda: now.timestamp())
    later = email.utils.format_datetime(datetime(2026, 1, 2, 3, 6, 5, tzinfo=UTC), usegmt=True)
    earlier = email.utils.format_datetime(datetime(2026, 1, 2, 3, 0, 0, tzinfo=UTC), usegmt=True)
    cases: list[tuple[dict[str, str], float | None]] = [
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "1500", "Retry-After": "9"}, 1.5),  # OpenAI's milliseconds win
        ({"retry-after-ms": "soon", "Retry-After": "9"}, 9.0),  # unreadable: the standard header
        ({"retry-after-ms": "-5"}, 0.0),
        ({"Retry-After": "2.5"}, 2.5),
        ({"Retry-After": later}, 120.0),  # an HTTP date two minutes ahead
        ({"Retry-After": earlier}, 0.0),  # a date past: no wait
        ({"Retry-After": "tomorrow"}, None),
        ({}, None),
    ]
    for headers, want in cases:
        assert client.retry_after_seconds(headers) == (pytest.approx(want) if want is not None else None), headers
