"""Scoring a test's checks with the registered evaluators: finding one by name, binding a check's arguments, running
it; the registry's answers to the catalog's loader (`CHECK_RULES`) and the versions the scorer's version is made of.

Importing this module registers the built-in evaluators (bench.scorer.evaluators): the registry itself
(bench.scorer.registry) only holds what is registered, so that an evaluator module can import it without a cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
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
    """Score one check; bad arguments become a BenchError naming the test and the check."""
    ev = get_evaluator(ctx.test, index, check)
    try:
        score = ev(ctx, check.args)
    except SandboxUnavailable as exc:
        return Score(0.0, f"error: {exc}", "error")
    except ArgError as exc:
        raise BenchError(f"test {ctx.test.id}: check {index + 1} ({check.evaluator}): {exc}; fix the catalog") from None
    clamped = min(1.0, max(0.0, float(score.score)))
    return score if clamped == score.score else Score(clamped, score.detail, score.status)


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
