"""Progress of long scoring work: `bench rescore`, and `bench report`, `compare`, `health` and `view` when they rescore
cassettes in memory. A rich bar on a terminal (cassettes done, exchanges read, time); when piped, a line every
INTERVAL_S, the first only after INTERVAL_S, so short work prints nothing and a log still shows a long one moving.

A command turns it on around its work (`shown`); the pipeline asks for the progress of the current work (`start`),
which is None when no command asked (a library caller, a test).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import Any, TextIO

INTERVAL_S = 10.0

_label: str | None = None


@contextlib.contextmanager
def shown(label: str) -> Iterator[None]:
    """While open, scoring work started in this process shows its progress on stderr, named `label`."""
    global _label
    previous, _label = _label, label
    try:
        yield
    finally:
        _label = previous


def start(units: int) -> ScoreProgress | None:
    """The progress of work in `units` cassettes (or shards of one), or None when no command asked for it."""
    return None if _label is None else ScoreProgress(_label, units)


class ScoreProgress:
    def __init__(self, label: str, units: int, stream: TextIO | None = None) -> None:
        self.label = label
        self.units = units
        self.stream = stream or sys.stderr
        self.done = self.exchanges = 0
        self.t0 = self.last = time.monotonic()
        self._bar: Any = None
        self._task: Any = None
        if self.stream.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                TextColumn(f"[bold]{label}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("cassette(s), {task.fields[exchanges]} exchange(s) read"),
                TimeElapsedColumn(),
                console=Console(file=self.stream),
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task(label, total=units, exchanges=0)

    def read(self, n: int) -> None:
        """`n` more exchanges read (from this process, or the workers' total through `read_total`)."""
        self.read_total(self.exchanges + n)

    def read_total(self, total: int) -> None:
        self.exchanges = total
        self._show()

    def unit_done(self) -> None:
        self.done += 1
        self._show()

    def _show(self) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, exchanges=f"{self.exchanges:,}")
            return
        now = time.monotonic()
        if now - self.last >= INTERVAL_S:
            self.last = now
            print(
                f"{self.label}: {self.done}/{self.units} cassette(s), {self.exchanges:,} exchange(s) read, "
                f"{now - self.t0:.0f} s",
                file=self.stream,
                flush=True,
            )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
