"""`bench rescore` as a user runs it, in a subprocess whose sockets cannot connect anywhere."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.scorer.scores_io import read_scores
from tests.scorer.helpers import record, write_cassette

ROOT = Path(__file__).resolve().parents[3]
# Loaded by site on start-up: every connect() fails, so any network use would show up as a failure.
NO_NETWORK = """
import socket

def _blocked(*args, **kwargs):
    raise OSError("network blocked by the test")

socket.socket.connect = _blocked
socket.socket.connect_ex = _blocked
socket.create_connection = _blocked
"""


def bench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(NO_NETWORK)
    env = {"PYTHONPATH": f"{site}:{ROOT}", "PATH": "/usr/bin:/bin", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "bench", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )


def test_rescore_offline_then_flips(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_cassette(runs / "a.cassette", [record("no.such.test", "x"), record("math.ages", "So Ann = 13.\nAnswer: 13")])
    result = bench(tmp_path, "rescore", str(runs), "--jobs", "2")
    assert result.returncode == 0, result.stderr
    assert "scores written to" in result.stdout and "unknown test id 'no.such.test'" in result.stdout
    scores = (runs / "scores.jsonl").read_bytes()
    again = bench(tmp_path, "rescore", str(runs), "--jobs", "1", "--max-tokens", "1")
    assert again.returncode == 0, again.stderr
    assert "approximations" in again.stdout and "1 flip(s)" in again.stdout and "math.ages" in again.stdout
    assert (runs / "scores.jsonl").read_bytes() != scores


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    result = bench(tmp_path, "rescore", str(tmp_path / "missing"))
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "no such file or directory" in result.stderr


def test_catalog_and_deadline_flags(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_cassette(runs / "a.cassette", [record("mine.capital", "The answer is Paris")])
    suite = tmp_path / "mine.yaml"
    suite.write_text(
        "suite: mine\ntests:\n  - id: capital\n    category: knowledge\n    subcategory: geography\n"
        "    description: A capital.\n    prompt: What is the capital of France?\n"
        "    checks: [{evaluator: contains_all, args: {values: [Paris]}}]\n    reference: {answer: Paris}\n"
    )
    builtin = bench(tmp_path, "rescore", str(runs), "--jobs", "1")  # the built-in catalog has no such test
    assert builtin.returncode == 0, builtin.stderr
    assert "unknown test id 'mine.capital'" in builtin.stdout
    mine = bench(tmp_path, "rescore", str(runs), "--jobs", "1", "--catalog", str(suite))
    assert mine.returncode == 0, mine.stderr
    [result] = read_scores(runs / "scores.jsonl")[1]
    assert (result.test, result.status, result.passed) == ("mine.capital", "scored", True)
    # The recorded stream took longer than a microsecond: with that deadline the client would have given up.
    late = bench(tmp_path, "rescore", str(runs), "--jobs", "1", "--catalog", str(suite), "--deadline", "0.000001")
    assert late.returncode == 0, late.stderr
    [result] = read_scores(runs / "scores.jsonl")[1]
    assert (result.status, result.failure_type) == ("errored", "timeout")
