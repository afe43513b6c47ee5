"""The evaluator registry: `@evaluator("name", version=1, args={...})` over pure scoring functions.

An evaluator is `(ctx: EvalContext, args: Mapping) -> Score`. The registry validates a check's argument names
(unknown or missing → BenchError naming the test and the check) and fills declared defaults, so evaluators read
their arguments without guarding. Bumping `version` marks a change in what an evaluator decides; it changes the
scorer version and shows up as flips.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from bench.errors import BenchError
from catalog.model import Check, TestSpec
from scorer.context import EvalContext

__all__ = ["EVALUATORS", "REQUIRED", "ArgError", "EvalContext", "Evaluator", "Score", "evaluator", "get_evaluator"]

ScoreStatus = Literal["scored", "skipped"]


@dataclass(frozen=True)
class Score:
    score: float
    detail: str = ""
    status: ScoreStatus = "scored"

    @classmethod
    def of(cls, ok: bool, detail: str = "") -> Score:
        return cls(1.0 if ok else 0.0, detail)

    @classmethod
    def skipped(cls, why: str) -> Score:
        return cls(0.0, why, "skipped")


class ArgError(ValueError):
    """A check's arguments have the right names but an unusable value (bad regex, wrong type)."""


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()

EvalFn = Callable[[EvalContext, Mapping[str, Any]], Score]


@dataclass(frozen=True)
class Evaluator:
    name: str
    version: int
    fn: EvalFn
    # Argument name → default (REQUIRED when it has none).
    params: Mapping[str, Any]
    # Groups of arguments of which exactly one must be given (file_contains: value or regex).
    one_of: tuple[tuple[str, ...], ...] = ()

    def bind(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments with defaults filled in; raises ArgError naming what is wrong."""
        unknown = sorted(set(args) - set(self.params))
        if unknown:
            allowed = ", ".join(sorted(self.params)) or "none"
            raise ArgError(f"unknown argument(s) {', '.join(unknown)} (allowed: {allowed})")
        missing = sorted(k for k, v in self.params.items() if v is REQUIRED and k not in args)
        if missing:
            raise ArgError(f"missing argument(s) {', '.join(missing)}")
        for group in self.one_of:
            if sum(1 for k in group if args.get(k) is not None) != 1:
                raise ArgError(f"give exactly one of {', '.join(group)}")
        bound = {k: v for k, v in self.params.items() if v is not REQUIRED}
        bound.update(args)
        return bound

    def __call__(self, ctx: EvalContext, args: Mapping[str, Any]) -> Score:
        return self.fn(ctx, self.bind(args))


EVALUATORS: dict[str, Evaluator] = {}


def evaluator(
    name: str, version: int = 1, *, args: Mapping[str, Any] | None = None, one_of: tuple[tuple[str, ...], ...] = ()
) -> Callable[[EvalFn], EvalFn]:
    def register(fn: EvalFn) -> EvalFn:
        if name in EVALUATORS:
            raise RuntimeError(f"evaluator {name!r} registered twice")
        EVALUATORS[name] = Evaluator(name, version, fn, dict(args or {}), one_of)
        return fn

    return register


def get_evaluator(test: TestSpec, index: int, check: Check) -> Evaluator:
    _load_builtin()
    ev = EVALUATORS.get(check.evaluator)
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
        bound = ev.bind(check.args)
        score = ev.fn(ctx, bound)
    except ArgError as exc:
        raise BenchError(f"test {ctx.test.id}: check {index + 1} ({check.evaluator}): {exc}; fix the catalog") from None
    clamped = min(1.0, max(0.0, float(score.score)))
    return score if clamped == score.score else Score(clamped, score.detail, score.status)


def validate_checks(test: TestSpec) -> None:
    """Raise BenchError for an unknown evaluator or argument names that do not fit, without scoring anything."""
    for i, check in enumerate(test.checks):
        ev = get_evaluator(test, i, check)
        try:
            ev.bind(check.args)
        except ArgError as exc:
            raise BenchError(f"test {test.id}: check {i + 1} ({check.evaluator}): {exc}; fix the catalog") from None


def evaluator_versions() -> dict[str, int]:
    _load_builtin()
    return {name: ev.version for name, ev in sorted(EVALUATORS.items())}


def _load_builtin() -> None:
    import scorer.evaluators  # noqa: F401 - registers the built-in evaluators on import
