"""Input nested absurdly deep gets a one-line message, never a RecursionError traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import bench.catalog
from bench.cli import main
from bench.core.fingerprint import fingerprint
from bench.core.nesting import (
    MAX_ALIASED_VALUES,
    MAX_DEPTH,
    TooDeep,
    _JsonValuesLoader,
    check_depth,
    depth_exceeds,
    load_yaml,
)
from bench.proxy.recordings import streams
from bench.scorer.evaluators.json_checks import extract_json

DEEP_FLOW = "[" * 5000 + "]" * 5000


def test_depth_is_measured_without_recursion() -> None:
    value: list[object] = []
    for _ in range(50_000):
        value = [value]
    assert depth_exceeds(value)
    assert not depth_exceeds([[1], {"a": [2]}], limit=3)
    assert depth_exceeds([[1], {"a": [[2]]}], limit=3)


@pytest.mark.parametrize("text", [f"a: {DEEP_FLOW}\n", "a:\n" + "".join("  " * i + "- \n" for i in range(3000))])
def test_load_yaml_refuses_deep_documents_in_flow_and_block_style(text: str) -> None:
    with pytest.raises(TooDeep, match=f"nested more than {MAX_DEPTH} levels deep"):
        load_yaml(text)


def test_catalog_validate_on_a_suite_nested_5000_deep_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = tmp_path / "deep.yaml"
    suite.write_text(f"suite: s\ndescription: d\ntests:\n  - id: x\n    prompt: {DEEP_FLOW}\n")
    assert main(["catalog", "validate", str(suite)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"bench: error: {suite}: YAML: nested more than {MAX_DEPTH} levels deep; a suite never needs that: flatten it"
    ]


def test_a_record_config_nested_5000_deep_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "bench.yaml"
    config.write_text(f"models: {DEEP_FLOW}\n")
    assert main(["record", "--config", str(config), "--upstream", "http://127.0.0.1:9"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nested more than" in err[0] and "Traceback" not in err[0]


def test_json_answers_nested_deep_are_no_usable_json() -> None:
    with pytest.raises(TooDeep):
        extract_json(DEEP_FLOW)
    with pytest.raises(TooDeep):
        extract_json("[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5))
    assert extract_json("[" * 50 + "]" * 50)[0]


def test_request_bodies_nested_deep_are_fingerprinted_as_bytes() -> None:
    body = b'{"stream": true, "a": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    assert fingerprint("POST", "/v1/chat/completions", "", body).startswith("fp1:")
    assert not streams(body)


@pytest.mark.parametrize(("loader", "what"), [("rules", "rules file"), ("prices", "price table")])
def test_a_rules_file_or_price_table_nested_5000_deep_is_one_line(tmp_path: Path, loader: str, what: str) -> None:
    from bench.core.errors import BenchError
    from bench.scorer.report.cost import load_prices
    from bench.scorer.rules import load_rules

    path = tmp_path / "deep.yaml"
    path.write_text("a: " + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    with pytest.raises(BenchError) as caught:
        (load_rules if loader == "rules" else load_prices)(path)
    message = str(caught.value)
    assert "\n" not in message and f"a {what} never needs that" in message and str(path) in message


def test_the_limit_is_the_documented_depth_not_the_parsers() -> None:
    # Shallow enough for yaml to parse (no RecursionError): MAX_DEPTH levels are read, one more is refused.
    want: list[object] = []
    for _ in range(MAX_DEPTH - 1):
        want = [want]
    assert load_yaml("[" * MAX_DEPTH + "]" * MAX_DEPTH) == want
    with pytest.raises(TooDeep, match=f"nested more than {MAX_DEPTH} levels deep"):
        load_yaml("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))


def test_check_depth_takes_a_limit_and_names_it() -> None:
    value = {"a": [[1]]}
    assert check_depth(value, limit=3) is value
    with pytest.raises(TooDeep, match=r"^nested more than 2 levels deep$"):
        check_depth(value, limit=2)
    assert check_depth(5, limit=0) == 5  # a scalar has no depth


def _laughs(levels: int) -> str:
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_aliases_that_repeat_a_document_past_the_bound_are_refused_at_once() -> None:
    # 9^12 values from 12 lines: building them, or any walk of what was built, would never end.
    with pytest.raises(yaml.YAMLError, match=f"aliases repeat more than {MAX_ALIASED_VALUES} values") as caught:
        load_yaml(_laughs(12))
    mark = getattr(caught.value, "problem_mark", None)
    # l1..l4 repeat 74,718 values; the first alias in l5 (66,430 more) passes the bound
    assert mark is not None and (mark.line + 1, mark.column) == (6, 9)
    assert load_yaml(_laughs(5))["l4"][8][8][8][8][8] == "x"  # within the bound


def test_an_alias_inside_the_collection_it_names_is_refused() -> None:
    with pytest.raises(yaml.YAMLError, match=r"alias \*a is inside the collection it names"):
        load_yaml("a: &a [1, {b: *a}]\n")


def test_aliases_count_toward_depth_where_they_are_used() -> None:
    inner = "[" * 60 + "]" * 60
    outer = "[" * 60 + "*x" + "]" * 60
    assert load_yaml(f"a: &x {inner}\nb: *x\n")["a"] == load_yaml(f"b: {inner}\n")["b"]
    with pytest.raises(TooDeep):
        load_yaml(f"a: &x {inner}\nb: {outer}\n")


def test_a_suite_whose_aliases_explode_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = tmp_path / "laughs.yaml"
    suite.write_text("suite: s\ndescription: d\ntests:\n  - id: x\n    prompt: hi\n" + _laughs(12))
    assert main(["catalog", "validate", str(suite)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "aliases repeat more than" in err[0] and str(suite) in err[0], err


def test_the_built_in_catalog_reads_the_same_with_either_parser() -> None:
    # libyaml parses when PyYAML has it; the resolvers (no timestamps) must apply to it as to the Python parser.
    class PythonParser(yaml.SafeLoader):
        yaml_implicit_resolvers = _JsonValuesLoader.yaml_implicit_resolvers

    files = sorted(Path(bench.catalog.__file__).parent.joinpath("data").rglob("*.yaml"))
    assert files
    for file in files:
        text = file.read_text(encoding="utf-8")
        assert load_yaml(text) == yaml.load(text, Loader=PythonParser), file
    assert load_yaml("d: 2024-01-05\n") == {"d": "2024-01-05"}
