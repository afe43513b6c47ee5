"""Input nested absurdly deep gets a one-line message, never a RecursionError traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.cli import main
from bench.fingerprint import fingerprint
from bench.nesting import MAX_DEPTH, TooDeep, check_depth, depth_exceeds, load_yaml
from proxy.recordings import streams
from scorer.evaluators.json_checks import extract_json

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
    from bench.errors import BenchError
    from scorer.report.cost import load_prices
    from scorer.rules import load_rules

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
