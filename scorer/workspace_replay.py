"""Rebuild a multi-turn task's final workspace offline: a fresh copy of the fixture, then every turn's recorded
tool calls (final attempts only, in turn and call order) re-applied with bench.workspace, as the driver applied them."""

from __future__ import annotations

from collections.abc import Sequence

from bench.catalog import fixture_dir
from bench.catalog.model import TestSpec
from bench.scorer.context import EvalContext, ReplayedWorkspace, Turn
from bench.workspace import ToolWorkspace


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


def evaluation_context(test: TestSpec, turns: list[Turn]) -> EvalContext:
    """What a test's evaluators see: the turns, and the workspace replayed on first use when the test has one."""
    factory = (lambda: replay_workspace(test, turns)) if test.workspace is not None else None
    return EvalContext(test, turns, workspace_factory=factory)
