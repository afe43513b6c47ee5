"""The built-in catalog's multi-turn references really fix the fixture: re-applied with bench.workspace, the checks'
commands succeed, and they fail on the untouched fixture (so the checks can fail)."""

from __future__ import annotations

import pytest

from bench.catalog import fixture_dir
from bench.catalog.model import TestSpec as Spec
from bench.scorer.checked_catalog import load_catalog
from bench.workspace import ToolWorkspace

WORKSPACE_TESTS = [t for t in load_catalog().tests.values() if t.workspace is not None]


def commands(test: Spec) -> list[list[str]]:
    return [list(c.args["command"]) for c in test.checks if c.evaluator == "command_succeeds"]


@pytest.mark.parametrize("test", WORKSPACE_TESTS, ids=lambda t: t.id)
def test_reference_turns_fix_the_fixture(test: Spec) -> None:
    ws_spec = test.workspace
    assert ws_spec is not None
    with ToolWorkspace.create(fixture_dir(ws_spec.fixture), ws_spec.allow_commands, tools=ws_spec.tools) as ws:
        before = [ws.run(argv)[0] for argv in commands(test)]
        assert all(status != 0 for status in before), f"{test.id}: a check passes before any change"
        n_calls = 0
        refused = []
        for turn in test.reference.turns:
            for call in turn:
                result = ws.call(call.name, call.arguments)
                n_calls += 1
                if not result.ok and not result.output:  # refused (a command that ran and failed has output)
                    refused.append(call.name)
                    continue
                # Running the tests before fixing them is a legitimate first step; every other call must succeed.
                assert result.ok or call.name == "run_command", (test.id, call.name, result.error)
        # A recovery task's reference meets the error it is about, exactly once, and recovers from it; no other
        # reference has a call refused.
        assert len(refused) == (test.subcategory == "recover"), (test.id, refused)
        assert len(test.reference.turns) <= test.limits.max_turns and n_calls <= test.limits.max_calls
        for argv in commands(test):
            status, output = ws.run(argv)
            assert status == 0, (test.id, argv, output[-500:])


GROUPS = ("read", "edit", "run", "chain", "recover")


def test_repository_tasks_cover_the_five_groups_of_toolcallbench() -> None:
    by_group = {g: [t.id for t in WORKSPACE_TESTS if t.subcategory == g] for g in GROUPS}
    assert len(WORKSPACE_TESTS) >= 20
    assert all(len(ids) >= 2 for ids in by_group.values()), by_group
    # A chain is several dependent steps: at least two turns of calls before the answer.
    assert all(len(t.reference.turns) >= 2 for t in WORKSPACE_TESTS if t.subcategory == "chain")


def test_there_are_several_multi_turn_bug_fixes() -> None:
    fixes = [t for t in WORKSPACE_TESTS if t.subcategory == "bug_fix"]
    assert len(fixes) >= 5
    assert any("apply_patch" in (c.name for turn in t.reference.turns for c in turn) for t in fixes)
