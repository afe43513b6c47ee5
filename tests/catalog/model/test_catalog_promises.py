"""Promises of docs/catalog.md that no other test held: the built-in suites table (read from the document itself),
the default limits and workspace tools, and the `minilib` fixture's own check failing as shipped with its 18 tests."""

from __future__ import annotations

import inspect
import re
from collections import Counter
from pathlib import Path

from bench.catalog import fixture_dir
from bench.scorer.checked_catalog import load_catalog
from bench.workspace import ToolWorkspace
from tests.catalog.model.test_loader import write_suite

DOC = Path(__file__).resolve().parents[3] / "docs" / "catalog.md"


def suites_table() -> dict[str, tuple[str, int]]:
    section = DOC.read_text().split("## Built-in suites", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| (\w+) \| .* \| (\d+) \|$", section, re.M)
    return {suite: (category, int(count)) for suite, category, count in rows}


def test_the_built_in_suites_table_is_the_catalog() -> None:
    catalog = load_catalog(None)
    table = suites_table()
    assert len(table) == 7
    assert {s: (t[0], t[1]) for s, t in table.items()} == {
        suite: (
            Counter(t.category for t in catalog.tests.values() if t.suite == suite).most_common(1)[0][0],
            sum(t.suite == suite for t in catalog.tests.values()),
        )
        for suite in {t.suite for t in catalog.tests.values()}
    }
    # Every test of a suite is in the category the table names.
    assert all(t.category == table[t.suite][0] for t in catalog.tests.values())
    total = sum(count for _, count in table.values())
    intro = re.search(r"\((\d+) tests in (\d+) suites\)", DOC.read_text())
    assert intro is not None and (int(intro[1]), int(intro[2])) == (len(catalog.tests), len(table)) == (total, 7)
    # "Python (7), C (5) and Go (2) programs"
    code = [t for t in catalog.tests.values() if t.suite == "code"]
    languages = Counter(c.evaluator for t in code for c in t.checks if c.evaluator.endswith("_output"))
    assert languages == {"python_output": 7, "c_output": 5, "go_output": 2}


SUITE = """
suite: demo
defaults:
  category: agentic
  subcategory: x
  system: Be brief.
tests:
  - id: plain
    description: No limits given.
    prompt: Hi
    checks: [{evaluator: contains_all, args: {values: [hi]}}]
    reference: {answer: hi}
  - id: task
    description: A workspace task with no limits or tools given.
    system: null
    prompt: Fix it.
    workspace: {fixture: minilib, allow_commands: [python3]}
    checks: [{evaluator: command_succeeds, args: {command: [python3, check.py]}}]
    reference: {turns: [[{name: run_command, arguments: {command: [python3, check.py]}}]]}
"""


def test_default_limits_workspace_tools_and_a_dropped_system_prompt(tmp_path: Path) -> None:
    catalog = load_catalog(write_suite(tmp_path, SUITE))
    plain, task = catalog.tests["demo.plain"], catalog.tests["demo.task"]
    assert (plain.limits.max_turns, plain.limits.max_calls) == (1, 0)
    assert (task.limits.max_turns, task.limits.max_calls) == (12, 20)
    assert task.workspace is not None and len(task.workspace.tools) == 6  # all six workspace tools
    assert [t["function"]["name"] for t in task.tools] == list(task.workspace.tools)
    assert plain.messages[0] == {"role": "system", "content": "Be brief."}
    assert task.messages == ({"role": "user", "content": "Fix it."},)  # `system: null` drops the default


def test_minilib_check_runs_18_tests_and_fails_as_shipped() -> None:
    with ToolWorkspace.create(fixture_dir("minilib"), ["python3"]) as ws:
        status, output = ws.run(["python3", "check.py"])
    assert status != 0
    assert re.search(r"^Ran 18 tests", output, re.M), output[-500:]
    # The five deliberate bugs and the missing median each fail something.
    failing = set(re.findall(r"^(?:FAIL|ERROR): \w+ \(tests\.test_(\w+)\.", output, re.M))
    assert failing == {"stats", "bounds", "text", "dates", "stack"}, output[-2000:]
    assert "median" in output


def test_run_command_times_out_after_10_seconds_by_default() -> None:
    # A command that sleeps longer is not run here (10 s of a test); the default is the documented value.
    assert inspect.signature(ToolWorkspace.create).parameters["command_timeout"].default == 10.0
