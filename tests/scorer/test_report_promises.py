"""Promises of docs/report.md that no other test held: `--out`'s suffix picks the format (and `--format` wins), the
epochs table's k values, a failed result without a type counted as `unclassified`, and a piped table 160 columns
wide."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cli import main
from bench.scorer.report import aggregate
from bench.scorer.report.load import load
from tests.scorer.report.factory import meta, result, write_scores

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def scores(tmp_path: Path) -> Path:
    return write_scores(tmp_path / "s.jsonl", meta(), [result("t.a", "m"), result("t.b", "m", passed=False)])


def kind(text: str) -> str:
    if text.lstrip().lower().startswith(("<!doctype html", "<html")):
        return "html"
    if text.lstrip().startswith("{"):
        return "json" if json.loads(text)["format"] == "bench-report" else "other json"
    if "\n| " in "\n" + text and "|---" in text.replace(" ", "").replace(":", ""):
        return "markdown"
    return "table" if "Pass rate" in text and "\x1b[" not in text else "other"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("r.html", "html"),
        ("r.htm", "html"),
        ("r.md", "markdown"),
        ("r.json", "json"),
        ("r.txt", "table"),
        ("r.out", "table"),  # any other suffix: table
        ("report", "table"),
    ],
)
def test_the_out_suffix_picks_the_format(scores: Path, tmp_path: Path, name: str, expected: str) -> None:
    out = tmp_path / name
    assert main(["report", str(scores), "--out", str(out)]) == 0
    assert kind(out.read_text()) == expected


def test_format_wins_over_the_suffix(scores: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    assert main(["report", str(scores), "--format", "json", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert (report["format"], report["version"]) == ("bench-report", 1)


def test_epochs_rows_are_k_1_powers_of_two_and_the_largest_n(tmp_path: Path) -> None:
    results = [result("t.a", "m", passed=e % 3 == 0, epoch=e) for e in range(6)]
    report = aggregate.build(load(write_scores(tmp_path / "s.jsonl", meta(), results)))
    assert sorted(e.k for e in report.epochs if e.model == "m") == [1, 2, 4, 6]


def test_a_failed_result_without_a_type_is_counted_as_unclassified(tmp_path: Path) -> None:
    untyped = result("t.b", "m", passed=False)
    untyped["failure_type"] = None
    results = [result("t.a", "m", passed=False, failure_type="no_call"), untyped]
    report = aggregate.build(load(write_scores(tmp_path / "s.jsonl", meta(), results)))
    assert report.failures["m"] == {"no_call": 1, "unclassified": 1}


def test_a_piped_table_is_160_columns_wide(tmp_path: Path) -> None:
    long_test = "suite." + "a_very_long_test_name_" * 5  # a row wider than 80 columns
    scores = write_scores(tmp_path / "s.jsonl", meta(), [result(long_test, "m", passed=False)])
    piped = subprocess.run(
        [sys.executable, "-m", "bench", "report", str(scores)],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env={**os.environ, "COLUMNS": "80"},
    )  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    widest = max(len(line) for line in piped.stdout.splitlines())
    assert 80 < widest <= 160 and "\x1b[" not in piped.stdout
