"""A run recorded by several workers (`bench proxy --workers N`) is rescored as one: the same exchanges written as one
cassette or spread over a run's shards score the same, a conversation whose turns are in different shards (where
exchange ids repeat) included."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import msgspec

from bench.core.cassette import CassetteWriter
from bench.core.cassette.records import Exchange, RunMeta, Settings, Shard
from bench.scorer.results import Result
from tests.scorer.helpers import CATALOG, HASHES, record
from tests.support.rescored import rescored

RUN = "rec-20261203-120000"


def write(path: Path, records: Sequence[Exchange], shard: Shard | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    w = CassetteWriter(
        path,
        settings=Settings(mode="record"),
        run=RunMeta(id="r1", tests=dict(HASHES)),
        shard=shard if shard is not None else msgspec.UNSET,
    )
    for rec in records:
        w.put(rec)
    w.close()
    return path


def traffic() -> list[tuple[int, Exchange]]:
    """(worker, record): each record as the worker that took its connection recorded it, ids counted per worker."""
    plan = [
        # t.capital epoch 0: two turns, on different workers; the final one answers right.
        (0, record("t.capital", "Lyon", epoch=0, turn=0)),
        (1, record("t.capital", "**Paris**.", epoch=0, turn=1)),
        # t.capital epoch 1: a retried turn, its final attempt on the other worker, answering wrong.
        (1, record("t.capital", "**Paris**.", epoch=1, attempt=1)),
        (0, record("t.capital", "Lyon", epoch=1, attempt=2)),
        (0, record("t.weather", calls=[("get_weather", {"city": "Paris"})], epoch=0)),
        (1, record("t.weather", calls=[("get_weather", {"city": "Rome"})], epoch=1)),
    ]
    ids = [0, 0]
    out = []
    for started, (worker, rec) in enumerate(plan, start=1):
        out.append((worker, msgspec.structs.replace(rec, id=f"x{ids[worker]}", started=started * 1000)))
        ids[worker] += 1
    return out


def verdicts(results: list[Result]) -> dict[tuple[str, int], tuple[str, bool | None, int, int]]:
    return {(r.test, r.epoch): (r.status, r.passed, r.attempts, r.retries) for r in results}


def test_a_run_in_two_shards_scores_as_the_same_run_in_one_cassette(tmp_path: Path) -> None:
    recs = traffic()
    # One cassette numbers its exchanges once; each worker numbers its own.
    one = write(
        tmp_path / "one" / "rec.cassette", [msgspec.structs.replace(r, id=f"x{i}") for i, (_, r) in enumerate(recs)]
    )
    shards = [
        write(tmp_path / "two" / f"{RUN}-w{k}.cassette", [r for w, r in recs if w == k], Shard(RUN, k, 2))
        for k in (0, 1)
    ]
    _, alone = rescored([one], catalog=CATALOG)
    meta, split = rescored(shards, catalog=CATALOG)
    # Known answers: the final turn or attempt decides, wherever it was recorded.
    expected = {
        ("t.capital", 0): ("scored", True, 2, 0),
        ("t.capital", 1): ("scored", False, 2, 1),
        ("t.weather", 0): ("scored", True, 1, 0),
        ("t.weather", 1): ("scored", False, 1, 0),
    }
    assert verdicts(alone) == expected
    assert verdicts(split) == expected
    assert [c.path for c in meta.cassettes] == [f"{RUN}-w0.cassette", f"{RUN}-w1.cassette"]
    # Each result is named by its first exchange's cassette; an exchange in another shard names its own.
    capital = next(r for r in split if (r.test, r.epoch) == ("t.capital", 0))
    assert capital.cassette == f"{RUN}-w0.cassette"
    assert [(e.cassette, e.id, e.turn, e.final) for e in capital.exchanges] == [
        (msgspec.UNSET, "x0", 0, True),
        (f"{RUN}-w1.cassette", "x0", 1, True),
    ]
    retried = next(r for r in split if (r.test, r.epoch) == ("t.capital", 1))
    assert retried.cassette == f"{RUN}-w1.cassette"
    assert [(e.cassette, e.id, e.attempt, e.final) for e in retried.exchanges] == [
        (msgspec.UNSET, "x1", 1, False),
        (f"{RUN}-w0.cassette", "x1", 2, True),
    ]
    assert all(e.cassette is msgspec.UNSET for r in alone for e in r.exchanges)


def test_shards_rescored_with_jobs_and_in_any_order_score_the_same(tmp_path: Path) -> None:
    recs = traffic()
    shards = [
        write(tmp_path / f"{RUN}-w{k}.cassette", [r for w, r in recs if w == k], Shard(RUN, k, 2)) for k in (0, 1)
    ]
    _, forward = rescored(shards, catalog=CATALOG)
    _, backward = rescored(shards[::-1], catalog=CATALOG, jobs=2)
    assert msgspec.json.encode(sorted(forward, key=lambda r: (r.test, r.epoch))) == msgspec.json.encode(
        sorted(backward, key=lambda r: (r.test, r.epoch))
    )
