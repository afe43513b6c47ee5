"""What flipped between an earlier scores file and a new one, and which change caused it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scorer.results import CheckScore, Meta, Result

ResultKey = tuple[str, str, str, int]


@dataclass(frozen=True)
class Flip:
    test: str
    model: str
    epoch: int
    run: str
    old_status: str
    new_status: str
    old_score: float | None
    new_score: float | None
    old_passed: bool | None
    new_passed: bool | None
    cause: str


def result_key(r: Result) -> ResultKey:
    return (r.run or "", r.model or "", r.test, r.epoch)


def _checks_cause(old: Sequence[CheckScore], new: Sequence[CheckScore]) -> list[str]:
    causes = []
    for i in range(max(len(old), len(new))):
        a = old[i] if i < len(old) else None
        b = new[i] if i < len(new) else None
        if a is None and b is not None:
            causes.append(f"check {b.evaluator} added")
        elif b is None and a is not None:
            causes.append(f"check {a.evaluator} removed")
        elif a is not None and b is not None:
            if a.evaluator != b.evaluator:
                causes.append(f"check {i + 1} now {b.evaluator} (was {a.evaluator})")
                continue
            name = b.evaluator
            if a.version != b.version:
                causes.append(f"evaluator {name} v{a.version}→v{b.version}")
            if a.args != b.args:
                causes.append(f"{name} arguments changed")
            if a.weight != b.weight:
                causes.append(f"{name} weight {a.weight}→{b.weight}")
    return causes


def explain(old_meta: Meta, new_meta: Meta, a: Result, b: Result) -> str:
    causes = _checks_cause(a.checks, b.checks)
    if old_meta.parser_version != new_meta.parser_version:
        causes.append(f"parser v{old_meta.parser_version}→v{new_meta.parser_version}")
    if old_meta.budgets != new_meta.budgets:
        causes.append("what-if budgets changed")
    if a.catalog_test_hash != b.catalog_test_hash:
        causes.append("test changed in the catalog")
    if not causes and a.score == b.score and a.passed != b.passed:
        causes.append("pass threshold changed")
    if not causes and old_meta.scorer_version != new_meta.scorer_version:
        causes.append(f"scorer {old_meta.scorer_version}→{new_meta.scorer_version}")
    return "; ".join(causes) or "recording changed"


def find_flips(
    old_meta: Meta,
    old_results: Sequence[Result],
    new_meta: Meta,
    new_results: Sequence[Result],
) -> list[Flip]:
    """Results whose pass/fail (or status) changed; a result absent from either file is not a flip."""
    before = {result_key(r): r for r in old_results}
    flips = []
    for b in new_results:
        a = before.get(result_key(b))
        if a is None or (a.passed == b.passed and a.status == b.status):
            continue
        run, model, test, epoch = result_key(b)
        flips.append(
            Flip(
                test=test,
                model=model,
                epoch=epoch,
                run=run,
                old_status=a.status,
                new_status=b.status,
                old_score=a.score,
                new_score=b.score,
                old_passed=a.passed,
                new_passed=b.passed,
                cause=explain(old_meta, new_meta, a, b),
            )
        )
    return flips
