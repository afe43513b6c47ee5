"""What flipped between an earlier scores file and a new one, and which change caused it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec

from bench.scorer.results import CheckScore, Meta, Result

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
        flip = _flip(old_meta, new_meta, before.get(result_key(b)), b)
        if flip is not None:
            flips.append(flip)
    return flips


def _flip(old_meta: Meta, new_meta: Meta, a: Result | None, b: Result) -> Flip | None:
    if a is None or (a.passed == b.passed and a.status == b.status):
        return None
    run, model, test, epoch = result_key(b)
    return Flip(
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


JoinKey = tuple[str, str, int, str]


def join_key(r: Result | JobKey) -> JoinKey:
    """The scores file's order (bench.scorer.pipeline.sort_key without the cassette): a job's results are adjacent."""
    return (r.model or "", r.test, r.epoch, r.run or "")


class JobKey(msgspec.Struct, tag_field="kind", tag="result"):
    """Only what orders a result line: read fast to check a file's order before joining on it."""

    run: str | None = None
    model: str | None = None
    test: str = ""
    epoch: int = 0


_JOB_DECODER = msgspec.json.Decoder(JobKey)


def in_join_order(path: Path) -> bool:
    """Whether the result lines of a scores file are in the order `bench rescore` writes them (a file edited or
    written otherwise is compared through a map instead)."""
    last: JoinKey | None = None
    with open(path, "rb") as fh:
        fh.readline()
        for line in fh:
            if b'"kind":"result"' not in line:
                continue
            try:
                key = join_key(_JOB_DECODER.decode(line))
            except msgspec.DecodeError:
                return False  # a damaged line is named by the full read
            if last is not None and key < last:
                return False
            last = key
    return True


class FlipJoin:
    """find_flips as a merge join: the new results are fed in the scores file's order and the earlier file's
    results (`old`, in the same order) are read alongside, one job at a time. Like find_flips, a job found several
    times in the earlier file (results without a run id) is compared with its last line there."""

    def __init__(self, old_meta: Meta, new_meta: Meta, old: Iterator[Result]) -> None:
        self.old_meta, self.new_meta = old_meta, new_meta
        self.old = old
        self.flips: list[Flip] = []
        self._next: Result | None = next(old, None)
        self._key: JoinKey | None = None
        self._match: Result | None = None

    def see(self, b: Result) -> None:
        key = join_key(b)
        if key != self._key:
            while self._next is not None and join_key(self._next) < key:
                self._next = next(self.old, None)
            match = None
            while self._next is not None and join_key(self._next) == key:
                match, self._next = self._next, next(self.old, None)
            self._key, self._match = key, match
        flip = _flip(self.old_meta, self.new_meta, self._match, b)
        if flip is not None:
            self.flips.append(flip)


class FlipMap:
    """find_flips fed one new result at a time, for an earlier file not in join order (held whole, as before)."""

    def __init__(self, old_meta: Meta, new_meta: Meta, old: Iterable[Result]) -> None:
        self.old_meta, self.new_meta = old_meta, new_meta
        self.before = {result_key(r): r for r in old}
        self.flips: list[Flip] = []

    def see(self, b: Result) -> None:
        flip = _flip(self.old_meta, self.new_meta, self.before.get(result_key(b)), b)
        if flip is not None:
            self.flips.append(flip)
