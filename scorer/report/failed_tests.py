"""The failed tests of a run, listed one by one (the HTML report's list, each linked into `bench view` when the report
is given the view's URL): results that were scored and failed, and results that errored in transport."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlencode, urlsplit, urlunsplit

from bench.core.errors import BenchError
from bench.scorer.results import Result

MAX_LISTED = 1000  # failures listed; past this they are counted (a run of 100,000 results fails by the thousand)


@dataclass(frozen=True)
class FailedTest:
    run: str
    model: str
    test: str
    epoch: int
    status: str  # "failed" (scored, not passed) or "errored" (in transport: no verdict)
    failure_type: str | None


@dataclass
class FailedTests:
    listed: list[FailedTest] = field(default_factory=list)
    total: int = 0


class FailedTally:
    def __init__(self) -> None:
        self.out = FailedTests()

    def add(self, result: Result) -> None:
        status = "errored" if result.status == "errored" else "failed"
        if status == "failed" and (result.status != "scored" or result.passed is not False):
            return
        self.out.total += 1
        if len(self.out.listed) < MAX_LISTED:
            self.out.listed.append(
                FailedTest(result.run or "", result.model or "", result.test, result.epoch, status, result.failure_type)
            )

    def finish(self) -> FailedTests:
        self.out.listed.sort(key=lambda f: (f.model, f.test, f.epoch, f.run))
        return self.out


def view_base(url: str) -> str:
    """`bench report --view-url`: a `bench view` address (http or https), without a fragment; BenchError if not."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise BenchError(f"--view-url {url[:200]!r}: give the address bench view printed, e.g. http://127.0.0.1:8765/")
    return urlunsplit((parts.scheme, parts.netloc, parts.path or "/", parts.query, ""))


def view_link(base: str, failed: FailedTest) -> str:
    """The failed test's page in `bench view` (its #/result deep link)."""
    key = {"run": failed.run, "model": failed.model, "test": failed.test, "epoch": failed.epoch}
    return f"{base}#/result?{urlencode(key)}"
