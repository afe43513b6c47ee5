"""Scoring a test's checks with the registered evaluators: finding one by name, binding a check's arguments, running
it; the registry's answers to the catalog's loader (`CHECK_RULES`) and the versions the scorer's version is made of.

Importing this module registers the built-in evaluators (bench.scorer.evaluators): the registry itself
(bench.scorer.registry) only holds what is registered, so that an evaluator module can import it without a cycle.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import bench.scorer.evaluators  # noqa: F401 - registers the built-in evaluators
from bench.catalog.model import Check, TestSpec
from bench.core.errors import BenchError
from bench.scorer.registry import EVALUATORS, ArgError, EvalContext, Evaluator, Score, arg_problem
from bench.workspace.sandbox import SandboxUnavailable


def find_evaluator(name: str) -> Evaluator | None:
    return EVALUATORS.get(name)


class _RegistryRules:
    """The registry as the catalog's loader asks about checks (bench.catalog.model.CheckRules)."""

    def known(self, name: str) -> bool:
        return find_evaluator(name) is not None

    def problem(self, name: str, args: Mapping[str, Any]) -> tuple[list[str | int], str] | None:
        ev = find_evaluator(name)
        return ([], f"unknown evaluator {name!r}") if ev is None else arg_problem(ev, args)

    def tool_args(self, name: str) -> tuple[str, ...]:
        ev = find_evaluator(name)
        return () if ev is None else ev.tool_args


CHECK_RULES = _RegistryRules()
# A check that runs longer than this is stopped and gets an error verdict: only a broken evaluator (a regex that
# backtracks forever on an answer, a program past its own limits) reaches it; the code checks' programs stop at 60 s.
CHECK_DEADLINE_S = 120.0


def evaluator_schemas() -> dict[str, dict[str, Any]]:
    """Every evaluator's arguments schema, by name."""
    return {name: ev.schema for name, ev in sorted(EVALUATORS.items())}


def get_evaluator(test: TestSpec, index: int, check: Check) -> Evaluator:
    ev = find_evaluator(check.evaluator)
    if ev is None:
        raise BenchError(
            f"test {test.id}: check {index + 1} uses unknown evaluator {check.evaluator!r}; "
            f"use one of: {', '.join(sorted(EVALUATORS))}"
        )
    return ev


def run_check(ctx: EvalContext, index: int, check: Check) -> Score:
    """Score one check; bad arguments become a BenchError naming the test and the check (the catalog is wrong, so
    every result would be). Anything else that stops the evaluator (it raises, runs past CHECK_DEADLINE_S, cannot
    start its sandbox) is this check's error verdict naming why: one broken check never stops a rescore."""
    ev = get_evaluator(ctx.test, index, check)
    try:
        with deadline(CHECK_DEADLINE_S):
            score = ev(ctx, check.args)
    except SandboxUnavailable as exc:
        return Score.error(f"error: {exc}")
    except ArgError as exc:
        raise BenchError(f"test {ctx.test.id}: check {index + 1} ({check.evaluator}): {exc}; fix the catalog") from None
    except CheckTimeout:
        return Score.error(f"evaluator {ev.name} ran past {CHECK_DEADLINE_S:g} s and was stopped")
    except Exception as exc:  # any failure of the evaluator is the check's error verdict
        return Score.error(f"evaluator {ev.name} failed: {error_line(exc)}")
    if score.status == "error":
        return score
    clamped = min(1.0, max(0.0, float(score.score)))
    return score if clamped == score.score else Score(clamped, score.detail, score.status)


def error_line(exc: BaseException) -> str:
    """`Type: message` on one line, cut to 200 characters."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= 200 else text[:199] + "…"


class CheckTimeout(Exception):
    """The check ran past CHECK_DEADLINE_S."""


def _expire(_signum: int, _frame: object) -> None:
    raise CheckTimeout


# How many check_deadlines scopes the main thread is in: while > 0, SIGALRM's handler is _expire already.
_scopes = 0


@contextlib.contextmanager
def check_deadlines() -> Iterator[None]:
    """Install the deadlines' SIGALRM handler once for the many checks of a block (a unit's): each check's deadline
    then only arms and disarms the timer. Installing and restoring a handler per check cost ~10 of its ~12 us
    (signal's enum conversions), 3.5% of a rescore. The main thread only, as deadline."""
    global _scopes
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGALRM, _expire) if _scopes == 0 else None
    _scopes += 1
    try:
        yield
    finally:
        _scopes -= 1
        if _scopes == 0:
            signal.signal(signal.SIGALRM, _restorable(previous))


class deadline:  # used as a function (`with deadline(s):`); a class: cheaper per check than a generator
    """Raise CheckTimeout in the block after `seconds` (SIGALRM: the main thread only, where every process-pool and
    in-process rescore scores; a Dask worker's thread runs its checks without one). Inside check_deadlines only the
    timer is armed; elsewhere the handler is installed and restored around the block."""

    __slots__ = ("installed", "previous", "seconds", "timed")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.timed = self.installed = False
        self.previous: Any = None

    def __enter__(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        if _scopes == 0:
            self.previous, self.installed = signal.signal(signal.SIGALRM, _expire), True
        self.timed = True
        signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def __exit__(self, *_exc: object) -> None:
        if self.timed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            if self.installed:
                signal.signal(signal.SIGALRM, _restorable(self.previous))


def _restorable(handler: Any) -> Any:
    """A handler signal.signal accepts back: None (one not installed from Python) restores the default."""
    return signal.SIG_DFL if handler is None else handler


def validate_checks(test: TestSpec) -> None:
    """Raise BenchError for an unknown evaluator or arguments that do not fit, without scoring anything."""
    for i, check in enumerate(test.checks):
        ev = get_evaluator(test, i, check)
        try:
            ev.bind(check.args)
        except ArgError as exc:
            raise BenchError(f"test {test.id}: check {i + 1} ({check.evaluator}): {exc}; fix the catalog") from None


def evaluator_versions() -> dict[str, int]:
    return {name: ev.version for name, ev in sorted(EVALUATORS.items())}
