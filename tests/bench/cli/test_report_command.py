"""The three commands are registered, write files, and never pull in aiohttp."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.cli import build_parser, main
from bench.scorer.report.compare import compare
from bench.scorer.report.load import load
from tests.scorer.report.factory import meta, result, write_scores


def test_commands_are_registered() -> None:
    help_text = build_parser().format_help()
    for command in ("report", "compare", "health"):
        assert command in help_text


def test_no_aiohttp_in_reports() -> None:
    code = (
        "import sys, bench.cli.report_command, bench.scorer.report.aggregate, bench.scorer.report.compare, "
        "bench.scorer.report.health, "
        "bench.scorer.report.render_html, bench.scorer.report.render_table, bench.scorer.report.render_markdown, "
        "bench.scorer.report.render_json; sys.exit('aiohttp' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


def test_table_to_a_file_has_no_colour_codes(tmp_path: Path) -> None:
    scores = write_scores(tmp_path / "s.jsonl", meta(), [result("t.a", "m"), result("t.b", "m", passed=False)])
    out = tmp_path / "report.txt"
    assert main(["report", str(scores), "--out", str(out)]) == 0
    text = out.read_text()
    assert "Pass rate" in text and "50.0%" in text and "\x1b[" not in text


def test_unwritable_out_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scores = write_scores(tmp_path / "s.jsonl", meta(), [result("t.a", "m")])
    assert main(["report", str(scores), "--format", "json", "--out", str(tmp_path / "no" / "dir.json")]) == 1
    assert "cannot write" in capsys.readouterr().err
    assert main(["compare", str(scores), str(scores), "--jobs", "0"]) == 1
    assert "--jobs 0" in capsys.readouterr().err


def test_pairs_not_scored_on_both_sides_and_duplicate_keys(tmp_path: Path) -> None:
    a = write_scores(tmp_path / "a.jsonl", meta(), [result("t.a", "m"), result("t.b", "m")])
    b_results = [
        result("t.a", "m", status="errored", failure_type="timeout"),
        result("t.b", "m", run="r-1"),
        result("t.b", "m", run="r-2", passed=False),
    ]
    b = write_scores(tmp_path / "b.jsonl", meta(), b_results)
    c = compare(load(a), load(b))
    assert c.paired == 2 and c.not_comparable == 1
    # r-2 comes last in the file (sorted by run), so it is the one paired: a regression.
    assert [(r.test, r.after) for r in c.regressions] == [("t.b", "fail")]
    assert any("sharing a (model, test, epoch)" in w for w in c.warnings)
