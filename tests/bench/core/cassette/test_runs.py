"""A run's shards found and merged as readers see them (bench.core.cassette.runs): cassettes written by the real
CassetteWriter, grouped by name and header, their records merged in start order."""

from __future__ import annotations

from pathlib import Path

import msgspec

from bench.core.cassette import CassetteReader, CassetteWriter
from bench.core.cassette.records import Shard
from bench.core.cassette.runs import group_runs, in_start_order, shard_of_name
from tests.support.records import exchange


def write(path: Path, starts: list[int], shard: Shard | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    w = CassetteWriter(path, shard=shard if shard is not None else msgspec.UNSET)
    for i, started in enumerate(starts):
        w.put(exchange(id=f"x{i}", started=started))
    w.close()
    return path


def test_shard_names_are_read_from_the_name_alone() -> None:
    assert shard_of_name("/a/rec-1-w0.cassette") == ("/a/rec-1", 0, -1)
    assert shard_of_name("s3://b/p/rec-1-w12-00003.cassette") == ("s3://b/p/rec-1", 12, 3)
    assert shard_of_name("/a/rec-1.cassette") is None
    assert shard_of_name("/a/rec-1-w0-3.cassette") is None  # rotations are numbered with five digits or more


def test_a_run_s_shards_are_one_run_by_worker_then_rotation_and_others_stay_alone(tmp_path: Path) -> None:
    run = "rec-20261203"
    w1b = write(tmp_path / f"{run}-w1-00001.cassette", [5], Shard(run=run, index=1, count=2))
    w0 = write(tmp_path / f"{run}-w0.cassette", [1], Shard(run=run, index=0, count=2))
    w1 = write(tmp_path / f"{run}-w1.cassette", [2], Shard(run=run, index=1, count=2))
    alone = write(tmp_path / "other.cassette", [3])
    # Named like a shard, but its header says it is not one (written by hand, or by a bare proxy): a run of its own.
    impostor = write(tmp_path / "mine-w0.cassette", [4])
    runs = group_runs([alone, w1b, impostor, w1, w0])
    assert [r.files for r in runs] == [(alone,), (w0, w1, w1b), (impostor,)]


def test_records_of_several_cassettes_come_in_start_order_each_cassette_s_order_kept(tmp_path: Path) -> None:
    a = write(tmp_path / "a.cassette", [10, 30, 31, 70])
    b = write(tmp_path / "b.cassette", [20, 30, 60])
    got = [(i, r.started) for i, r in in_start_order([CassetteReader(a), CassetteReader(b)])]
    assert got == [(0, 10), (1, 20), (0, 30), (1, 30), (0, 31), (1, 60), (0, 70)]
    # A cassette holds exchanges as they ended: one that started earlier can follow; its own order is kept.
    c = write(tmp_path / "c.cassette", [50, 40])
    got = [(i, r.started) for i, r in in_start_order([CassetteReader(c), CassetteReader(b)])]
    assert got == [(1, 20), (1, 30), (0, 50), (0, 40), (1, 60)]
