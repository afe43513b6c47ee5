from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from bench.cli import main
from bench.cli.catalog_command import request_preview
from bench.scorer.checked_catalog import load_catalog


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_ls_lists_every_test_with_the_catalog_hash(capsys: pytest.CaptureFixture[str]) -> None:
    catalog = load_catalog()
    code, out, _ = run(capsys, "catalog", "ls")
    assert code == 0
    assert f"{len(catalog.tests)} tests" in out and catalog.hash in out
    code, out, _ = run(capsys, "catalog", "ls", "--suite", "agent")
    assert code == 0 and f"{len(catalog.select(['agent']))} tests" in out and "tools.weather_paris" not in out


def test_ls_unknown_suite_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "catalog", "ls", "--suite", "nope")
    assert code == 1 and err.startswith("bench: error: no tests in suite nope") and err.count("\n") == 1


def test_show_prints_checks_reference_and_request(capsys: pytest.CaptureFixture[str]) -> None:
    test = load_catalog().tests["tools.convert_usd_eur"]
    code, out, _ = run(capsys, "catalog", "show", "convert_usd_eur")  # the short id works when unambiguous
    assert code == 0
    for text in (test.id, test.hash, "tool_args", "convert_currency", "Convert 250 US dollars to euros."):
        assert text in out
    code, _, err = run(capsys, "catalog", "show", "weather")
    assert code == 1 and "did you mean" in err


def test_request_preview_is_what_the_model_is_sent() -> None:
    test = load_catalog().tests["json.order_response_format"]
    body = request_preview(test, "m")
    assert body["model"] == "m" and body["messages"] == [dict(m) for m in test.messages]
    assert body["response_format"]["type"] == "json_schema" and "tools" not in body
    json.dumps(body)


def test_validate_builtin_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    catalog = load_catalog()
    code, out, _ = run(capsys, "catalog", "validate")
    assert code == 0 and catalog.hash in out
    assert f"every reference passes its own checks ({len(catalog.tests)} tests)" in out


def test_validate_reports_a_reference_that_fails_its_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = tmp_path / "s.yaml"
    suite.write_text(
        textwrap.dedent(
            """
            suite: s
            tests:
              - id: wrong
                category: reasoning
                subcategory: arithmetic
                description: The reference answer is wrong.
                prompt: What is 2 + 2?
                checks: [{evaluator: numeric, args: {value: 4}}]
                reference: {answer: "5"}
            """
        )
    )
    code, out, err = run(capsys, "catalog", "validate", str(suite))
    assert code == 1 and "s.wrong" in out and "reference problem" in err


def test_validate_bad_schema_names_file_test_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = tmp_path / "s.yaml"
    suite.write_text("suite: s\ntests:\n  - {id: t, description: d, prompt: p, checks: [], reference: {answer: a}}\n")
    code, _, err = run(capsys, "catalog", "validate", str(tmp_path))
    assert code == 1 and str(suite) in err and "test 't'" in err and "tests[0].checks" in err


def test_ls_and_show_read_the_catalog_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = tmp_path / "mine.yaml"
    suite.write_text(
        textwrap.dedent(
            """
            suite: mine
            tests:
              - id: sum
                category: reasoning
                subcategory: arithmetic
                description: Adds two numbers.
                prompt: What is 19 + 23?
                checks: [{evaluator: numeric, args: {value: 42}}]
                reference: {answer: "42"}
            """
        )
    )
    mine = load_catalog(suite)
    code, out, _ = run(capsys, "catalog", "ls", "--catalog", str(suite))
    assert code == 0 and "1 tests" in out and "mine.sum" in out and mine.hash in out
    assert "tools.weather_paris" not in out  # the built-in catalog is not read
    code, out, _ = run(capsys, "catalog", "show", "sum", "--catalog", str(suite))
    assert code == 0 and "mine.sum" in out and "What is 19 + 23?" in out and mine.tests["mine.sum"].hash in out
    code, _, err = run(capsys, "catalog", "show", "convert_usd_eur", "--catalog", str(suite))
    assert code == 1 and err.startswith("bench: error:")
