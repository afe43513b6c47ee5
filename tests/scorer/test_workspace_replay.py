"""Multi-turn tasks: the fixture's final state rebuilt from the recorded calls, then the workspace checks."""

from __future__ import annotations

from typing import Any

import pytest

from bench.catalog.model import Catalog
from bench.catalog.model import TestSpec as Spec
from bench.scorer.checked_catalog import load_catalog
from bench.scorer.context import Turn
from bench.scorer.reference import reference_turns
from bench.scorer.scoring import score_conversation
from bench.scorer.workspace_replay import evaluation_context, replay_workspace
from tests.scorer.helpers import call, score, turn

OLD = "return sum(values) / (len(values) - 1)"
NEW = "return sum(values) / len(values)"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(None)


@pytest.fixture
def fix_mean(catalog: Catalog) -> Spec:
    return catalog.tests["agent.fix_mean"]


def run_tests(n: int) -> Turn:
    return turn("", [call("run_command", {"command": ["python3", "-m", "unittest", "tests.test_stats"]})], n=n)


def edit(old: str, new: str) -> dict[str, Any]:
    return {"path": "minilib/stats.py", "old": old, "new": new}


def test_reference_rebuilds_a_passing_state(fix_mean: Spec) -> None:
    result = score_conversation(fix_mean, reference_turns(fix_mean))
    assert result.status == "scored" and result.passed, result.checks


def test_edit_applied_in_order(fix_mean: Spec) -> None:
    turns = [turn("", [call("edit_file", edit(OLD, NEW))], n=0), turn("done", n=1)]
    replayed = replay_workspace(fix_mean, turns)
    try:
        text = (replayed.path / "minilib/stats.py").read_text()
        assert NEW in text and OLD not in text and not replayed.patch_failed
    finally:
        replayed.close()
    assert not replayed.path.exists()


def test_workspace_checks_on_the_final_state(fix_mean: Spec) -> None:
    turns = [turn("", [call("edit_file", edit(OLD, NEW))], n=0), turn("done", n=1)]
    c = evaluation_context(fix_mean, turns)
    try:
        assert score("file_contains", c, path="minilib/stats.py", value=NEW).score == 1.0
        assert score("file_contains", c, path="./minilib//stats.py", regex=r"/ len\(values\)$").score == 1.0
        assert score("file_not_contains", c, path="minilib/stats.py", value=OLD).score == 1.0
        assert score("file_unchanged", c, path="tests/test_stats.py").score == 1.0
        assert score("file_unchanged", c, path="minilib/stats.py").score == 0.0
        assert score("file_exists", c, path="minilib/nope.py").score == 0.0
        cmd = ["python3", "-m", "unittest", "tests.test_stats"]
        assert score("command_succeeds", c, command=cmd).score == 1.0
        assert score("command_succeeds", c, command=cmd, expect_exit=1).score == 0.0
    finally:
        c.close()


def test_failed_edit_is_patch_failed(fix_mean: Spec) -> None:
    turns = [turn("", [call("edit_file", edit("no such text", NEW))], n=0), run_tests(1), turn("done", n=2)]
    result = score_conversation(fix_mean, turns)
    assert result.passed is False and result.failure_type == "patch_failed"


def test_recovered_edit_is_not_patch_failed(fix_mean: Spec) -> None:
    turns = [
        turn("", [call("edit_file", edit("no such text", NEW))], n=0),
        turn("", [call("edit_file", edit(OLD, "return 0"))], n=1),
        run_tests(2),
        turn("done", n=3),
    ]
    result = score_conversation(fix_mean, turns)
    assert result.passed is False and result.failure_type == "outcome_mismatch"


def test_only_final_attempts_are_replayed(fix_mean: Spec) -> None:
    turns = [
        turn("", [call("edit_file", edit(OLD, "return 0"))], n=0, attempt=1),
        turn("", [call("edit_file", edit(OLD, NEW))], n=0, attempt=2),
        run_tests(1),
        turn("fixed", n=2),
    ]
    result = score_conversation(fix_mean, turns)
    assert result.passed is True, result.checks
