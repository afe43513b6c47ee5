"""Two sides (a run and a model each) on the same tests and epochs: flips first, then the rest."""

from __future__ import annotations

import msgspec

from bench.view.detail import Detail, detail
from bench.view.index import Index, Row
from bench.view.word_diff import Piece, word_diff


class Side(msgspec.Struct):
    run: str
    model: str


class Pair(msgspec.Struct):
    test: str
    epoch: int
    a: Row
    b: Row
    flip: str | None  # "regressed" (a passed, b failed), "improved", or None


class Comparison(msgspec.Struct):
    a: Side
    b: Side
    pairs: list[Pair]
    regressed: int
    improved: int
    only_a: int
    only_b: int


def _flip(pa: bool | None, pb: bool | None) -> str | None:
    return "regressed" if pa is True and pb is False else "improved" if pa is False and pb is True else None


def _side_rows(index: Index, side: Side) -> dict[tuple[str, int], Row]:
    rows = {(r.test, r.epoch): r for r in index.rows if r.run == side.run and r.model == side.model}
    if not rows:
        raise KeyError(f"no results for run {side.run!r} and model {side.model!r}")
    return rows


def compare(index: Index, a: Side, b: Side) -> Comparison:
    ra, rb = _side_rows(index, a), _side_rows(index, b)
    pairs = []
    for key in sorted(ra.keys() & rb.keys()):
        flip = _flip(ra[key].passed, rb[key].passed)
        pairs.append(Pair(test=key[0], epoch=key[1], a=ra[key], b=rb[key], flip=flip))
    order = {"regressed": 0, "improved": 1, None: 2}
    pairs.sort(key=lambda p: order[p.flip])
    return Comparison(
        a=a,
        b=b,
        pairs=pairs,
        regressed=sum(p.flip == "regressed" for p in pairs),
        improved=sum(p.flip == "improved" for p in pairs),
        only_a=len(ra.keys() - rb.keys()),
        only_b=len(rb.keys() - ra.keys()),
    )


class PairDetail(msgspec.Struct):
    """One test and epoch on both sides, and the word-level difference of their final answers."""

    a: Detail
    b: Detail
    flip: str | None
    diff: list[Piece]
    diff_note: str | None


def _final_text(d: Detail) -> str:
    """The final answer as text: what it said, then each tool call as `name(arguments)`."""
    finals = [x for x in d.exchanges if x.final] or d.exchanges
    if not finals:
        return ""
    said = finals[-1].answer
    return "\n".join([*([said.text] if said.text else []), *(f"{c.name}({c.arguments})" for c in said.tool_calls)])


def pair(index: Index, a: Side, b: Side, test: str, epoch: int) -> PairDetail:
    """KeyError when either side has no such result."""
    da = detail(index, index.find(a.run, a.model, test, epoch))
    db = detail(index, index.find(b.run, b.model, test, epoch))
    flip = _flip(da.row.passed, db.row.passed)
    pieces, note = word_diff(_final_text(da), _final_text(db))
    return PairDetail(a=da, b=db, flip=flip, diff=pieces, diff_note=note)
