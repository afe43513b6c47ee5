"""Rebuild a multi-turn task's final workspace offline: a fresh copy of the fixture, then every turn's recorded
tool calls (final attempts only, in turn and call order) re-applied with bench.workspace, as the driver applied them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.catalog import fixture_dir
from bench.catalog.model import TestSpec
from bench.scorer.context import Call, Turn
from bench.workspace import ToolResult, ToolWorkspace

# Calls that change files: a failure of the last one means the model's edit never landed.
EDIT_TOOLS = frozenset({"apply_patch", "edit_file"})


@dataclass
class ReplayedWorkspace:
    ws: ToolWorkspace
    fixture: Path
    results: list[tuple[Call, ToolResult]] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return self.ws.path

    @property
    def patch_failed(self) -> bool:
        """The last edit the model tried failed (earlier failures it recovered from do not count)."""
        edits = [r for c, r in self.results if c.name in EDIT_TOOLS]
        return bool(edits) and not edits[-1].ok

    def close(self) -> None:
        self.ws.close()


def replay_workspace(test: TestSpec, turns: Sequence[Turn]) -> ReplayedWorkspace:
    if test.workspace is None:
        raise ValueError(f"test {test.id} has no workspace")
    spec = test.workspace
    source = fixture_dir(spec.fixture)
    ws = ToolWorkspace.create(source, spec.allow_commands, tools=spec.tools)
    replayed = ReplayedWorkspace(ws, source)
    for turn in turns:
        for call in turn.calls:
            replayed.results.append((call, ws.call(call.name, call.arguments)))
    return replayed
