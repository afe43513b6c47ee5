"""What flipped between an earlier scores file and a new one, and which change caused it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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


def result_key(r: Mapping[str, Any]) -> ResultKey:
    return (r.get("run") or "", r.get("model") or "", r.get("test") or "", int(r.get("epoch") or 0))


def _checks_cause(old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]) -> list[str]:
    causes = []
    for i in range(max(len(old), len(new))):
        a = old[i] if i < len(old) else None
        b = new[i] if i < len(new) else None
        if a is None and b is not None:
            causes.append(f"check {b['evaluator']} added")
        elif b is None and a is not None:
            causes.append(f"check {a['evaluator']} removed")
        elif a is not None and b is not None:
            if a.get("evaluator") != b.get("evaluator"):
                causes.append(f"check {i + 1} now {b['evaluator']} (was {a['evaluator']})")
                continue
            name = b["evaluator"]
            if a.get("version") != b.get("version"):
                causes.append(f"evaluator {name} v{a.get('version')}→v{b.get('version')}")
            if a.get("args") != b.get("args"):
                causes.append(f"{name} arguments changed")
            if a.get("weight") != b.get("weight"):
                causes.append(f"{name} weight {a.get('weight')}→{b.get('weight')}")
    return causes


def explain(
    old_meta: Mapping[str, Any], new_meta: Mapping[str, Any], a: Mapping[str, Any], b: Mapping[str, Any]
) -> str:
    causes = _checks_cause(a.get("checks") or [], b.get("checks") or [])
    if old_meta.get("parser_version") != new_meta.get("parser_version"):
        causes.append(f"parser v{old_meta.get('parser_version')}→v{new_meta.get('parser_version')}")
    if old_meta.get("budgets") != new_meta.get("budgets"):
        causes.append("what-if budgets changed")
    if a.get("catalog_test_hash") != b.get("catalog_test_hash"):
        causes.append("test changed in the catalog")
    if not causes and a.get("score") == b.get("score") and a.get("passed") != b.get("passed"):
        causes.append("pass threshold changed")
    if not causes and old_meta.get("scorer_version") != new_meta.get("scorer_version"):
        causes.append(f"scorer {old_meta.get('scorer_version')}→{new_meta.get('scorer_version')}")
    return "; ".join(causes) or "recording changed"


def find_flips(
    old_meta: Mapping[str, Any],
    old_results: Sequence[Mapping[str, Any]],
    new_meta: Mapping[str, Any],
    new_results: Sequence[Mapping[str, Any]],
) -> list[Flip]:
    """Results whose pass/fail (or status) changed; a result absent from either file is not a flip."""
    before = {result_key(r): r for r in old_results}
    flips = []
    for b in new_results:
        a = before.get(result_key(b))
        if a is None or (a.get("passed") == b.get("passed") and a.get("status") == b.get("status")):
            continue
        run, model, test, epoch = result_key(b)
        flips.append(
            Flip(
                test=test,
                model=model,
                epoch=epoch,
                run=run,
                old_status=a.get("status") or "",
                new_status=b.get("status") or "",
                old_score=a.get("score"),
                new_score=b.get("score"),
                old_passed=a.get("passed"),
                new_passed=b.get("passed"),
                cause=explain(old_meta, new_meta, a, b),
            )
        )
    return flips
