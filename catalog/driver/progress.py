"""Progress of a run: a rich bar on a terminal, a plain line every N results or every minute when piped, or nothing."""

from __future__ import annotations

import sys
import time
from typing import Protocol, TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class Reporter(Protocol):
    def start(self, total: int) -> None: ...
    def advance(self, ok: bool) -> None: ...
    def stop(self) -> None: ...


class Quiet:
    def start(self, total: int) -> None:
        pass

    def advance(self, ok: bool) -> None:
        pass

    def stop(self) -> None:
        pass


class PlainLines:
    def __init__(self, every: int, stream: TextIO | None = None, interval: float = 60.0) -> None:
        self.every = every
        self.interval = interval
        self.stream = stream or sys.stderr
        self.total = self.done = self.errors = 0
        self.t0 = self.last = 0.0

    def start(self, total: int) -> None:
        self.total = total
        self.t0 = self.last = time.monotonic()

    def advance(self, ok: bool) -> None:
        self.done += 1
        self.errors += not ok
        now = time.monotonic()
        if self.done % self.every == 0 or now - self.last >= self.interval or self.done == self.total:
            self.last = now
            self._line(now)

    def _line(self, now: float) -> None:
        elapsed = now - self.t0
        eta = elapsed / self.done * (self.total - self.done) if self.done else 0.0
        print(
            f"bench record: {self.done}/{self.total} done, {self.errors} errors, "
            f"{elapsed:.0f}s elapsed, ETA {eta:.0f}s",
            file=self.stream,
            flush=True,
        )

    def stop(self) -> None:
        pass


class Bar:
    def __init__(self) -> None:
        self.errors = 0
        self.progress = Progress(
            TextColumn("[bold]recording"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("errors: {task.fields[errors]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        self.task: TaskID | None = None

    def start(self, total: int) -> None:
        self.progress.start()
        self.task = self.progress.add_task("record", total=total, errors=0)

    def advance(self, ok: bool) -> None:
        self.errors += not ok
        if self.task is not None:
            self.progress.update(self.task, advance=1, errors=self.errors)

    def stop(self) -> None:
        self.progress.stop()


def make_reporter(quiet: bool, every: int) -> Reporter:
    if quiet:
        return Quiet()
    if sys.stderr.isatty():
        return Bar()
    return PlainLines(every)
