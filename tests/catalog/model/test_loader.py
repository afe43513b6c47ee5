from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from bench.catalog import SUITES_DIR, fixture_dir
from bench.catalog.model import Catalog
from bench.core.errors import BenchError
from bench.scorer.checked_catalog import load_catalog

GOOD = """
suite: demo
defaults:
  category: reasoning
  subcategory: arithmetic
  system: Answer briefly.
  params: {max_tokens: 64, temperature: 0}
tests:
  - id: add
    description: Adds.
    prompt: What is 2 + 2?
    params: {max_tokens: 32}
    checks: [{evaluator: numeric, args: {value: 4}}]
    reference: {answer: "4"}
  - id: weather
    category: tool_calling
    subcategory: single_call
    description: Calls a tool.
    system: null
    messages: [{role: user, content: "Weather in Oslo?"}]
    tools: [get_weather, {name: ping, parameters: {type: object, properties: {}}}]
    checks:
      - {evaluator: tool_args, args: {name: get_weather, args: {city: Oslo}}, weight: 2}
    reference: {turns: [[{name: get_weather, arguments: {city: Oslo}}]]}
"""


def write_suite(directory: Path, text: str, name: str = "demo.yaml") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return path


def test_loads_a_suite_with_defaults_and_builtin_tools(tmp_path: Path) -> None:
    catalog = load_catalog(write_suite(tmp_path, GOOD))
    assert sorted(catalog.tests) == ["demo.add", "demo.weather"]
    add = catalog.tests["demo.add"]
    assert add.messages == (
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "What is 2 + 2?"},
    )
    assert add.params == {"max_tokens": 32, "temperature": 0}  # merged key-wise, the test wins
    assert add.checks[0].evaluator == "numeric" and add.checks[0].weight == 1.0
    weather = catalog.tests["demo.weather"]
    assert weather.category == "tool_calling" and weather.messages == ({"role": "user", "content": "Weather in Oslo?"},)
    assert [t["function"]["name"] for t in weather.tools] == ["get_weather", "ping"]
    assert weather.tools[0]["function"]["parameters"]["required"] == ["city"]
    assert weather.reference.turns[0][0].arguments == {"city": "Oslo"}
    assert weather.checks[0].weight == 2.0 and not weather.multi_turn


def bad(tmp_path: Path, text: str) -> str:
    path = write_suite(tmp_path, text)
    with pytest.raises(BenchError) as info:
        load_catalog(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    return message


def test_missing_field_names_file_test_and_field(tmp_path: Path) -> None:
    message = bad(tmp_path, GOOD.replace('    reference: {answer: "4"}\n', ""))
    assert "test 'add'" in message and "tests[0]" in message and "'reference' is a required property" in message


def test_unknown_evaluator(tmp_path: Path) -> None:
    message = bad(tmp_path, GOOD.replace("evaluator: numeric", "evaluator: numerik"))
    assert "test 'add'" in message and "tests[0].checks[0].evaluator" in message and "numerik" in message


def test_misspelt_evaluator_argument(tmp_path: Path) -> None:
    message = bad(tmp_path, GOOD.replace("{value: 4}", "{valu: 4}"))
    assert "tests[0].checks[0].args" in message and "'value' is a required property" in message


@pytest.mark.parametrize(
    ("args", "field", "expected"),
    [
        ("{value: four}", "args.value", "numeric: 'four' is not of type 'number'"),
        ("{value: 4, tolerance: true}", "args.tolerance", "numeric: True is not of type 'number'"),
        (
            "{value: 4, relativ: true}",
            "args",
            "numeric: Additional properties are not allowed ('relativ' was unexpected)",
        ),
    ],
)
def test_argument_types_come_from_the_signature(tmp_path: Path, args: str, field: str, expected: str) -> None:
    message = bad(tmp_path, GOOD.replace("{value: 4}", args))
    assert f"tests[0].checks[0].{field}: {expected}" in message


def test_what_a_schema_cannot_say_is_checked_at_load_too(tmp_path: Path) -> None:
    # file_contains needs exactly one of value and regex: refused when the suite loads, not when a run is scored.
    fixture = "workspace: {fixture: minilib, tools: [read_file]}\n    "
    both = GOOD.replace("{evaluator: numeric, args: {value: 4}}", "{evaluator: file_contains, args: {path: a}}")
    message = bad(tmp_path, both.replace("    prompt: What is 2 + 2?\n", f"    {fixture}prompt: What is 2 + 2?\n"))
    assert "tests[0].checks[0].args: file_contains: give exactly one of value, regex" in message
    message = bad(tmp_path, GOOD.replace("args: {name: get_weather, args", "args: {name: null, args"))
    assert "tests[1].checks[0].args.name: tool_args: None is not of type 'string'" in message


def test_wrong_type(tmp_path: Path) -> None:
    message = bad(tmp_path, GOOD.replace("{max_tokens: 32}", "{max_tokens: lots}"))
    assert "test 'add'" in message and "tests[0].params.max_tokens" in message


def test_prompt_and_messages_together(tmp_path: Path) -> None:
    message = bad(
        tmp_path,
        GOOD.replace("    prompt: What is 2 + 2?\n", "    prompt: x\n    messages: [{role: user, content: y}]\n"),
    )
    assert "test 'add'" in message and "exactly one of `prompt` or `messages`" in message


def test_unknown_builtin_tool_and_unoffered_tool_in_checks(tmp_path: Path) -> None:
    message = bad(tmp_path, GOOD.replace("tools: [get_weather,", "tools: [get_wether,"))
    assert "test 'weather'" in message and "tests[1].tools[0]" in message and "get_wether" in message
    message = bad(tmp_path, GOOD.replace("{name: get_weather, args", "{name: get_time, args"))
    assert "tests[1].checks[0].args.name" in message and "not one of the test's tools" in message


def test_bad_yaml_names_the_line(tmp_path: Path) -> None:
    message = bad(tmp_path, "suite: x\ntests: [\n  - : :\n")
    assert "line" in message and "not valid YAML" in message


def test_duplicate_ids(tmp_path: Path) -> None:
    message = bad(tmp_path, GOOD.replace("id: weather", "id: add"))
    assert "duplicate id 'demo.add'" in message


def test_suite_defined_twice(tmp_path: Path) -> None:
    write_suite(tmp_path, GOOD, "a.yaml")
    write_suite(tmp_path, GOOD, "b.yaml")
    with pytest.raises(BenchError, match="suite 'demo' is also defined"):
        load_catalog(tmp_path)


def test_missing_catalog(tmp_path: Path) -> None:
    with pytest.raises(BenchError, match="no catalog at"):
        load_catalog(tmp_path / "nope")
    with pytest.raises(BenchError, match=r"no \*.yaml suite files"):
        load_catalog(tmp_path)


def test_hash_is_stable_and_independent_of_location(tmp_path: Path) -> None:
    first = load_catalog(write_suite(tmp_path / "one", GOOD))
    second = load_catalog(write_suite(tmp_path / "two", GOOD))
    assert first.hash == second.hash
    assert {k: t.hash for k, t in first.tests.items()} == {k: t.hash for k, t in second.tests.items()}


@pytest.mark.parametrize(
    ("old", "new", "changes"),
    [
        ("What is 2 + 2?", "What is 2+2?", True),  # the prompt
        ("system: Answer briefly.", "system: Answer.", True),
        ("{max_tokens: 32}", "{max_tokens: 33}", True),
        ("{value: 4}", "{value: 5}", False),  # checks do not change what the model is sent
        ("description: Adds.", "description: Sums.", False),
        ('{answer: "4"}', '{answer: "four"}', False),
    ],
)
def test_hash_sensitivity(tmp_path: Path, old: str, new: str, changes: bool) -> None:
    before = load_catalog(write_suite(tmp_path / "a", GOOD))
    assert old in GOOD
    after = load_catalog(write_suite(tmp_path / "b", GOOD.replace(old, new)))
    assert (before.tests["demo.add"].hash != after.tests["demo.add"].hash) is changes
    assert (before.hash != after.hash) is changes
    assert before.tests["demo.weather"].hash == after.tests["demo.weather"].hash


WORKSPACE_SUITE = """
suite: ws
tests:
  - id: fix
    category: agentic
    subcategory: bug_fix
    description: Fix it.
    prompt: Fix the bug.
    workspace: {fixture: tiny, tools: [read_file, edit_file, run_command], allow_commands: [python3]}
    checks: [{evaluator: command_succeeds, args: {command: [python3, check.py]}}]
    reference: {turns: [[{name: edit_file, arguments: {path: m.py, old: "1", new: "2"}}]]}
"""


def test_workspace_tests_hash_their_fixture_contents(tmp_path: Path) -> None:
    fixture = tmp_path / "fixtures" / "tiny"
    fixture.mkdir(parents=True)
    (fixture / "m.py").write_text("X = 1\n")
    suites = tmp_path / "suites"
    write_suite(suites, WORKSPACE_SUITE)
    before = load_catalog(suites).tests["ws.fix"]
    assert before.workspace is not None and Path(before.workspace.fixture) == fixture.resolve()
    assert [t["function"]["name"] for t in before.tools] == ["read_file", "edit_file", "run_command"]
    assert before.limits.max_turns > 1 and before.multi_turn
    (fixture / "m.py").write_text("X = 2\n")
    from bench.catalog.model.loader import fixture_hash

    fixture_hash.cache_clear()
    after = load_catalog(suites).tests["ws.fix"]
    assert before.hash != after.hash


def test_workspace_errors(tmp_path: Path) -> None:
    (tmp_path / "fixtures" / "tiny").mkdir(parents=True)
    message = bad(tmp_path, WORKSPACE_SUITE.replace("fixture: tiny", "fixture: missing_one"))
    assert "tests[0].workspace.fixture" in message and "missing_one" in message
    message = bad(tmp_path, WORKSPACE_SUITE.replace(", allow_commands: [python3]", ""))
    assert "allow_commands" in message


def test_builtin_catalog() -> None:
    catalog = load_catalog()
    assert isinstance(catalog, Catalog) and len(catalog.tests) >= 60
    assert catalog.root == SUITES_DIR
    categories = {t.category for t in catalog.tests.values()}
    assert {
        "tool_calling",
        "agentic",
        "structured_output",
        "code",
        "reasoning",
        "instruction_following",
        "extraction",
    } <= categories
    subcategories = {t.subcategory for t in catalog.tests.values()}
    assert {"single_call", "arguments", "selection", "parallel", "no_call", "bug_fix", "python", "c"} <= subcategories
    assert all(t.id.startswith(t.suite + ".") and t.hash and t.checks for t in catalog.tests.values())
    assert all(t.reference.answer is not None or t.reference.turns for t in catalog.tests.values())
    assert len({t.hash for t in catalog.tests.values()}) == len(catalog.tests)  # no two tests send the same request
    assert load_catalog().hash == catalog.hash
    assert catalog.select(["agent"]) == sorted(
        (t for t in catalog.tests.values() if t.suite == "agent"), key=lambda t: t.id
    )


def test_builtin_catalog_copied_elsewhere_keeps_its_hash(tmp_path: Path) -> None:
    shutil.copytree(SUITES_DIR, tmp_path / "suites")
    assert load_catalog(tmp_path / "suites").hash == load_catalog().hash


def test_unknown_fixture_is_a_bench_error() -> None:
    with pytest.raises(BenchError, match="unknown fixture 'nope'"):
        fixture_dir("nope")


def test_an_unquoted_date_is_the_text_a_json_answer_holds(tmp_path: Path) -> None:
    # YAML 1.1 would read `2024-01-05` as a date, which no JSON value (a model's tool arguments) can ever equal.
    catalog = load_catalog(write_suite(tmp_path, GOOD.replace("city: Oslo", "city: 2024-01-05")))
    weather = catalog.tests["demo.weather"]
    assert weather.checks[0].args["args"] == {"city": "2024-01-05"}
    assert weather.reference.turns[0][0].arguments == {"city": "2024-01-05"}
