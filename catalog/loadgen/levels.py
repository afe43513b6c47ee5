"""The levels of a load run and the phases within one.

A level is one load held for a duration or a request count: a rate of open-loop arrivals (`rate`), a number of
requests kept in flight (`concurrency`; `synchronous` is one at a time, `throughput` as many as allowed, as in
GuideLLM), or a recorded schedule replayed at a speed (`replay`). Its label (`rate=4.5`) is what each exchange's
`X-Bench-Load` tag carries. Warm-up and cool-down are spans at a level's start and end, as a share of the level
(`10%`) or in seconds (`2s`); requests sent in them are recorded and tagged, and left out of the level's figures.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from bench.core.errors import BenchError

OPEN_KINDS = ("rate", "replay")
CLOSED_KINDS = ("concurrency", "synchronous", "throughput")

WARMUP, MEASURE, COOLDOWN = "warmup", "measure", "cooldown"


@dataclass(frozen=True)
class Level:
    index: int
    kind: str  # rate | concurrency | synchronous | throughput | replay
    value: float  # requests per second, requests in flight, or the replay's speed

    @property
    def label(self) -> str:
        return f"{self.kind}={self.value:g}"

    @property
    def open_loop(self) -> bool:
        return self.kind in OPEN_KINDS

    @property
    def concurrency(self) -> int:
        return max(1, round(self.value))


@dataclass(frozen=True)
class Span:
    """A warm-up or cool-down: a share of the level, or seconds; zero by default."""

    share: float = 0.0
    seconds: float = 0.0

    def __str__(self) -> str:
        return f"{self.seconds:g}s" if self.seconds else f"{100 * self.share:g}%"

    @property
    def none(self) -> bool:
        return not self.share and not self.seconds


_SPAN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(%|s)?\s*$")


def parse_span(text: str | None, flag: str) -> Span:
    if not text:
        return Span()
    found = _SPAN.match(text)
    if found is None:
        raise BenchError(f"{flag} {text!r}: give a share of each level (10%) or seconds (2s)")
    value, unit = float(found.group(1)), found.group(2)
    if unit == "%":
        if value >= 100:
            raise BenchError(f"{flag} {text}: a share must be below 100%")
        return Span(share=value / 100)
    return Span(seconds=value)


@dataclass(frozen=True)
class Bounds:
    """How long each level lasts (seconds or requests) and what of it is warm-up and cool-down."""

    duration_s: float | None = None
    requests: int | None = None
    warmup: Span = Span()
    cooldown: Span = Span()

    def check(self) -> None:
        if (self.duration_s is None) == (self.requests is None):
            raise BenchError("give each level a length: --duration SECONDS or --requests N (one of them)")
        if self.duration_s is not None and not self.duration_s > 0:
            raise BenchError(f"--duration must be above 0 (got {self.duration_s:g})")
        if self.requests is not None and self.requests < 1:
            raise BenchError(f"--requests must be at least 1 (got {self.requests})")
        if self.warmup.share + self.cooldown.share >= 1:
            raise BenchError("--warmup and --cooldown together take the whole level: leave some of it measured")
        if self.duration_s is not None and self.warmup.seconds + self.cooldown.seconds >= self.duration_s:
            raise BenchError("--warmup and --cooldown together are as long as --duration: leave some of it measured")

    def phase_by_time(self, at_s: float, length_s: float) -> str:
        """The phase of a request that started (or was due) `at_s` into a level lasting `length_s`."""
        warm = self.warmup.seconds or self.warmup.share * length_s
        cool = self.cooldown.seconds or self.cooldown.share * length_s
        if at_s < warm:
            return WARMUP
        if cool and at_s >= length_s - cool:
            return COOLDOWN
        return MEASURE

    def phase_by_count(self, index: int, count: int) -> str:
        """The phase of the request numbered `index` (from 0) of a level of `count` requests: shares only."""
        if index < int(self.warmup.share * count):
            return WARMUP
        if index >= count - int(self.cooldown.share * count):
            return COOLDOWN
        return MEASURE


def parse_values(text: str, flag: str, *, integer: bool = False) -> list[float]:
    out: list[float] = []
    for part in text.split(","):
        part = part.strip()
        try:
            value = float(int(part)) if integer else float(part)
        except ValueError:
            kind = "whole numbers" if integer else "numbers"
            raise BenchError(f"{flag} {text!r}: give {kind} separated by commas") from None
        if not value > 0 or not np.isfinite(value):
            raise BenchError(f"{flag} {text!r}: every value must be above 0")
        out.append(value)
    if not out:
        raise BenchError(f"{flag}: give at least one value")
    return out


def sweep_rates(synchronous_rate: float, throughput_rate: float, size: int) -> list[float]:
    """GuideLLM's sweep: after the synchronous and throughput levels, `size - 2` constant rates evenly spaced from the
    synchronous level's request rate to the throughput level's, the first (synchronous again) left out."""
    low, high = sorted((synchronous_rate, throughput_rate))
    rates = np.linspace(low, high, size - 1)[1:]
    return [float(r) for r in rates]
