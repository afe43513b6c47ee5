"""The HTML report's list of failed tests, each linked into `bench view` with --view-url; untrusted names escaped."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

from bench.cli import main
from tests.scorer.report.factory import meta, result, write_scores

HOSTILE = "<script>alert('x')</script>\"'&"


def _scores(tmp_path: Path) -> Path:
    results = [
        result("math.add", "m1", passed=True),
        result("math.add", "m2", passed=False, failure_type="wrong_answer"),
        result(f"tools.{HOSTILE}", "m1", passed=False, epoch=1, failure_type="no_call"),
        result("json.order", "m2", passed=None, status="errored", failure_type="upstream_error"),
        result("json.skip", "m2", passed=None, status="skipped"),
    ]
    return write_scores(tmp_path / "scores.jsonl", meta(), results)


def _report(tmp_path: Path, *flags: str) -> str:
    out = tmp_path / "report.html"
    assert main(["report", str(_scores(tmp_path)), "--out", str(out), *flags]) == 0
    return out.read_text()


def test_the_failed_tests_are_listed_and_linked_into_bench_view(tmp_path: Path) -> None:
    page = _report(tmp_path, "--view-url", "http://127.0.0.1:8765/?token=t#/runs")
    assert "<h2 id='failed-tests'>Failed tests (3)</h2>" in page  # two failed, one errored; not the skipped one
    table = page[page.index("id='failed-tests'") :]
    links = [unescape(h) for h in re.findall(r"<a href='([^']*)'>", table)]
    keys = [dict(parse_qsl(urlsplit(link).fragment.removeprefix("/result?"))) for link in links]
    assert all(link.startswith("http://127.0.0.1:8765/?token=t#/result?") for link in links)
    assert keys == [
        {"run": "r-1", "model": "m1", "test": f"tools.{HOSTILE}", "epoch": "1"},
        {"run": "r-1", "model": "m2", "test": "json.order", "epoch": "0"},
        {"run": "r-1", "model": "m2", "test": "math.add", "epoch": "0"},
    ]
    assert "<script" not in page and "upstream_error" in table and "wrong_answer" in table


def test_without_a_view_url_the_list_has_no_links_and_says_how(tmp_path: Path) -> None:
    page = _report(tmp_path)
    table = page[page.index("id='failed-tests'") :]
    assert "<a " not in table and "--view-url" in table


@pytest.mark.parametrize("url", ["javascript:alert(1)", "127.0.0.1:8765", "file:///etc/passwd", "http://"])
def test_a_view_url_that_is_not_a_web_address_is_refused(
    tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(_scores(tmp_path)), "--format", "html", "--view-url", url]) != 0
    err = capsys.readouterr().err
    assert "--view-url" in err and len(err.strip().splitlines()) == 1
