"""A check whose evaluator raises, runs past its deadline or cannot start its sandbox gets an error verdict naming
why; its result is errored (`evaluator_error`), and the rescore finishes, counts them and says so."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from bench.catalog.model import Check
from bench.cli import main
from bench.scorer import checks
from bench.scorer.checks import run_check
from bench.scorer.registry import EVALUATORS, EvalContext, Score, evaluator
from bench.scorer.scoring import score_conversation
from bench.workspace.sandbox import user as sandbox_user
from tests.scorer.helpers import spec, turn

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "cassettes" / "smollm2-135m-catalog.cassette"


def test_an_evaluator_that_raises_gives_its_check_an_error_verdict_naming_why() -> None:
    @evaluator("_test_raises")
    def raises(ctx: EvalContext) -> Score:
        """Fails the way a broken evaluator does."""
        return Score.of({}["missing"])  # type: ignore[index]

    try:
        test = spec([Check("equals", {"value": "a"}), Check("_test_raises", {})])
        verdict = score_conversation(test, [turn("a")])
    finally:
        del EVALUATORS["_test_raises"]
    assert verdict.status == "errored" and verdict.failure_type == "evaluator_error" and verdict.score is None
    ok, broken = verdict.checks
    assert (ok.status, ok.passed) == ("scored", True)
    assert (broken.status, broken.passed, broken.score) == ("error", None, None)
    assert broken.detail == "evaluator _test_raises failed: KeyError: 'missing'"


@pytest.mark.parametrize("scoped", [False, True], ids=["alone", "in-a-unit-scope"])
def test_a_check_that_runs_past_its_deadline_is_stopped_with_an_error_verdict(
    monkeypatch: pytest.MonkeyPatch, scoped: bool
) -> None:
    # A catalog regex that backtracks exponentially on this answer: minutes of CPU without the deadline. In a unit's
    # scope (check_deadlines) the handler is installed once and each check only arms the timer.
    monkeypatch.setattr(checks, "CHECK_DEADLINE_S", 0.3)
    test = spec([Check("regex", {"pattern": "^(a+)+$"}), Check("equals", {"value": "a"})])
    ctx = EvalContext(test, [turn("a" * 40 + "!")])
    with checks.check_deadlines() if scoped else contextlib.nullcontext():
        score = run_check(ctx, 0, test.checks[0])
        after = run_check(ctx, 1, test.checks[1])
    assert (score.status, score.detail) == ("error", "evaluator regex ran past 0.3 s and was stopped")
    assert after.status != "error"  # the timer was disarmed: the next check runs its course


@pytest.mark.parametrize("nested", [False, True])
def test_the_deadlines_leave_the_alarm_handler_and_timer_as_they_found_them(nested: bool) -> None:
    def mine(_signum: int, _frame: object) -> None:
        raise AssertionError("no alarm is due")

    previous = signal.signal(signal.SIGALRM, mine)
    try:
        with checks.check_deadlines():
            assert signal.getsignal(signal.SIGALRM) is not mine
            with checks.check_deadlines() if nested else contextlib.nullcontext():
                test = spec([Check("equals", {"value": "a"})])
                assert run_check(EvalContext(test, [turn("a")]), 0, test.checks[0]).score == 1.0
                assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
            assert signal.getsignal(signal.SIGALRM) is not mine
        assert signal.getsignal(signal.SIGALRM) is mine
        test = spec([Check("equals", {"value": "a"})])
        assert run_check(EvalContext(test, [turn("a")]), 0, test.checks[0]).score == 1.0
        assert signal.getsignal(signal.SIGALRM) is mine and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    finally:
        signal.signal(signal.SIGALRM, previous)


def _rescore(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, list[dict[str, object]]]:
    out = tmp_path / "scores.jsonl"
    rc = main(["rescore", str(SHIPPED), "--jobs", "1", "--out", str(out)])
    text = capsys.readouterr()
    lines = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    return rc, text.out + text.err, [line for line in lines if line["kind"] == "result"]


def test_a_sandbox_that_cannot_start_errors_its_checks_and_the_rescore_finishes_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fault injection: the sandbox's folder cannot be given to its user (what `os.chown` does as root of a user
    namespace that does not map `nobody`)."""

    def refused(*_args: object) -> None:
        raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(sandbox_user, "drop_to", lambda: (65534, 65534))
    monkeypatch.setattr(os, "lchown", refused)
    rc, said, results = _rescore(tmp_path, capsys)
    assert rc == 0
    errored = [r for r in results if r.get("failure_type") == "evaluator_error"]
    assert errored and all(r["status"] == "errored" and r["score"] is None for r in errored)
    details = {c["detail"] for r in errored for c in r["checks"] if c["status"] == "error"}  # type: ignore[attr-defined]
    # Every check that runs a program (code, and the workspace's, whose replayed tool calls run sandboxed too).
    assert details and all(
        re.fullmatch(r"evaluator \w+ failed: OSError: \[Errno 22\] Invalid argument", d) for d in details
    )
    assert {"evaluator python_output failed: OSError: [Errno 22] Invalid argument"} <= details
    n = sum(1 for r in errored for c in r["checks"] if c["status"] == "error")  # type: ignore[attr-defined]
    assert f"{n} check(s) could not be evaluated" in said and "evaluator_error" in said
    assert "Traceback" not in said
    # Everything else is scored as before: the other results keep their verdicts.
    assert sum(1 for r in results if r["status"] == "scored") == len(results) - len(errored) - 2  # 2 upstream errors


def _namespace_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _namespace_works(), reason="unshare -rn does not work here")
def test_rescore_as_root_of_a_user_namespace_finishes(tmp_path: Path) -> None:
    """`unshare -rn bench rescore` (a rootless container's setup): the shipped cassette is scored whole, the sandbox
    says in one line how it runs programs there, and no check errors."""
    out = tmp_path / "scores.jsonl"
    run = subprocess.run(
        ["unshare", "-rn", sys.executable, "-m", "bench", "rescore", str(SHIPPED), "--jobs", "2", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr and "could not be evaluated" not in run.stdout
    assert len([line for line in run.stderr.splitlines() if "sandbox" in line]) <= 1
    results = [r for line in out.read_bytes().splitlines() if (r := orjson.loads(line))["kind"] == "result"]
    assert len(results) == 208 and not [r for r in results if r.get("failure_type") == "evaluator_error"]
