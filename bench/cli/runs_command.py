"""`bench runs`: past runs, not files: one line per run id (a resumed run's cassettes together) with its models,
epochs, results and exchanges, and when it was recorded (docs/record.md, "Past runs")."""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NO_RUN = "(no run id)"  # a bare proxy's or the pytest plugin's cassette: listed one per file (one per run of workers)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "runs",
        help="list past runs (one line per run id: models, epochs, results, when)",
        description="List the runs recorded in cassette folders: one line per run id, its cassettes together.",
    )
    p.add_argument("paths", nargs="*", type=Path, help="folders or cassettes (default: ./cassettes)")
    p.set_defaults(handler=run_runs)


@dataclass
class RunLine:
    run: str
    started: str = ""
    cassettes: int = 0
    exchanges: int = 0
    failed: int = 0  # exchanges that did not complete with a 2xx status
    interrupted: bool = False
    models: Counter[str] = field(default_factory=Counter)
    epochs: set[int] = field(default_factory=set)
    results: set[tuple[str, str, int]] = field(default_factory=set)  # (test, model, epoch)
    configured_epochs: int | None = None

    def text(self) -> str:
        epochs = self.configured_epochs or len(self.epochs)
        models = ", ".join(sorted(self.models)) or "-"
        state = "  [interrupted]" if self.interrupted else ""
        failed = f" ({self.failed} failed)" if self.failed else ""
        return (
            f"{self.run}  {self.started or '-'}  models: {models}  epochs: {epochs}  results: {len(self.results)}  "
            f"exchanges: {self.exchanges}{failed}  cassettes: {self.cassettes}{state}"
        )


def _add(line: RunLine, path: Path) -> None:
    from bench.core.cassette import CassetteReader

    reader = CassetteReader(path)
    header = reader.header
    line.cassettes += 1
    started = header.run.started or header.created
    line.started = min(filter(None, (line.started, started[:19].replace("T", " ")))) if started else line.started
    config = header.run.config or {}
    epochs = config.get("epochs")
    if isinstance(epochs, int) and not isinstance(epochs, bool):
        line.configured_epochs = max(line.configured_epochs or 0, epochs)
    for ex in reader:
        line.exchanges += 1
        status = ex.response.status
        if ex.outcome != "complete" or status is None or status >= 400:
            line.failed += 1
        tags = ex.tags
        model = tags.get("model") or ex.upstream.model
        if model:
            line.models[model] += 1
        if tags.get("test"):
            epoch = int(tags["epoch"]) if tags.get("epoch", "").isdigit() else 0
            line.epochs.add(epoch)
            line.results.add((tags["test"], model or "", epoch))
    end = reader.end
    line.interrupted |= reader.truncated or (end is not None and end.interrupted is True)


def runs(paths: list[Path]) -> list[RunLine]:
    from bench.core.cassette import CassetteReader, find_cassettes
    from bench.core.cassette.records import Shard

    lines: dict[str, RunLine] = {}
    for path in find_cassettes(paths):
        header = CassetteReader(path).header
        run, shard = header.run.id, header.shard
        if run:
            key = label = run
        elif isinstance(shard, Shard):  # a run recorded by `bench proxy --workers N`: its shards are one line
            key = f"{NO_RUN} {Path(str(path)).parent / shard.run}"
            label = f"{NO_RUN} {shard.run} ({shard.count} workers)"
        else:
            key, label = f"{NO_RUN} {path}", f"{NO_RUN} {Path(str(path)).name}"
        _add(lines.setdefault(key, RunLine(run=label)), Path(str(path)))
    return sorted(lines.values(), key=lambda r: (r.started, r.run))


def run_runs(args: argparse.Namespace) -> int:
    paths = args.paths or [Path("cassettes")]
    found = runs(paths)
    if not found:
        print(f"no runs in {', '.join(map(str, paths))}")
        return 0
    for line in found:
        print(line.text())
    return 0
