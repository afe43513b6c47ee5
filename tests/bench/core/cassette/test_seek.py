"""bench.core.cassette.seek: one exchange read from its frame alone, correct as the file grows, is replaced or
damaged."""

from __future__ import annotations

import random
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.core.cassette import CassetteReader, CassetteWriter
from bench.core.cassette.seek import SeekIndex, scan
from bench.core.errors import CassetteError
from tests.bench.core.cassette.test_damage import damage, exchange, written
from tests.bench.core.cassette.v1 import FIXTURE


@pytest.fixture
def small_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("bench.core.cassette.writer.SEGMENT_BYTES", 6000)
    monkeypatch.setattr("bench.core.cassette.compact.SEGMENT_BYTES", 6000)
    monkeypatch.setattr("bench.core.cassette.compact.BLOCK_BYTES", 1500)


def no_whole_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on, reading the whole file fails: what is read must come from one frame's bytes."""

    def refuse(path: object) -> None:
        raise AssertionError("the whole file was read")

    monkeypatch.setattr("bench.core.cassette.seek._tail", refuse)


@pytest.mark.parametrize("close", [True, False])
def test_an_exchange_is_read_from_its_own_frame(
    tmp_path: Path, small_frames: None, monkeypatch: pytest.MonkeyPatch, close: bool
) -> None:
    path = tmp_path / "run.cassette"
    clean = {r.id: r for r in written(path, 60, close=close)}
    seek = SeekIndex(path)
    assert seek.read(["x59"]) == {"x59": clean["x59"]}  # indexes up to the frame holding it
    assert len(seek.frames) > 5 and seek.seeks == 1 and seek.scans == 0
    assert seek.read(["nope"]) == {}  # not there: the rest of the file is indexed once
    no_whole_file(monkeypatch)
    for rid in ["x0", "x31", "x59", "x17"]:
        assert seek.read([rid]) == {rid: clean[rid]}
    assert seek.seeks == 5 and seek.scans == 0
    assert seek.read(["x3", "x4", "x40"]) == {k: clean[k] for k in ["x3", "x4", "x40"]}
    assert seek.read(["nope"]) == {}  # indexed to the end: not read again


def test_every_exchange_reads_as_a_scan_reads_it(tmp_path: Path) -> None:
    shipped = Path(__file__).resolve().parents[4] / "cassettes" / "smollm2-135m-catalog.cassette"
    ids = [r.id for r in CassetteReader(shipped)]
    seek = SeekIndex(shipped)
    assert seek.read(ids) == scan(shipped, ids)
    assert seek.scans == 0


def test_a_growing_recording_then_its_closed_rewrite(tmp_path: Path, small_frames: None) -> None:
    path = tmp_path / "live.cassette"
    rng = random.Random(3)
    records = [exchange(i, rng) for i in range(40)]
    w = CassetteWriter(path)
    seek = SeekIndex(path)
    for r in records[:20]:
        w.put(r)
    while w.stats.records < 21:
        time.sleep(0.001)
    got = seek.read(["x19", "x2"])
    assert [got[k].response.chunks for k in ("x19", "x2")] == [records[i].response.chunks for i in (19, 2)]
    for r in records[20:]:
        w.put(r)
    while w.stats.records < 41:
        time.sleep(0.001)
    assert seek.read(["x39"])["x39"].response.chunks == records[39].response.chunks
    before = path.stat().st_ino
    w.close()  # recompressed and renamed over: every offset changes
    assert path.stat().st_ino != before
    clean = {r.id: r for r in CassetteReader(path)}
    assert seek.read(["x39", "x0", "x25"]) == {k: clean[k] for k in ("x39", "x0", "x25")}
    assert seek.scans == 0


@pytest.mark.parametrize("indexed", [True, False])
def test_damage_never_changes_a_record_nor_loses_a_readable_one(
    tmp_path: Path, small_frames: None, indexed: bool
) -> None:
    original = tmp_path / "orig.cassette"
    clean = {r.id: r for r in written(original, 60, close=True)}
    data = original.read_bytes()
    rng = random.Random(15)
    path = tmp_path / "run.cassette"
    for _ in range(40):
        shutil.copyfile(original, path)
        seek = SeekIndex(path)
        if indexed:
            assert seek.read(clean) == clean  # indexed whole before the damage
        damaged, what = damage(data, rng)
        with open(path, "r+b") as fh:  # in place: the same file, so the index has to notice by itself
            fh.write(damaged)
            fh.truncate()
        readable = _or_nothing(scan, path, clean)  # a file damaged past reading: one line, for both
        got = _or_nothing(seek.read, clean)
        assert all(got[k] == clean[k] for k in got), what
        assert readable.keys() <= got.keys(), what


def _or_nothing(read: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    try:
        return read(*args)
    except CassetteError:
        return {}


def test_v1_files_are_scanned(tmp_path: Path) -> None:
    ids = [r.id for r in CassetteReader(FIXTURE)]
    seek = SeekIndex(FIXTURE)
    assert seek.read(ids[-2:]) == scan(FIXTURE, ids[-2:])
    assert seek.scans == 1 and seek.seeks == 0


def test_nothing_is_written_into_or_beside_the_cassette(tmp_path: Path, small_frames: None) -> None:
    path = tmp_path / "run.cassette"
    written(path, 30, close=True)
    before: dict[str, Any] = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir()}
    seek = SeekIndex(path)
    seek.read(["x29", "x1"])
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir()}
    assert after == before


def test_indexing_ahead_while_another_thread_reads(
    tmp_path: Path, small_frames: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.cassette"
    clean = {r.id: r for r in written(path, 60, close=True)}
    seek = SeekIndex(path)
    warming = threading.Thread(target=seek.warm, kwargs={"frames_at_once": 1})
    warming.start()
    order = list(clean)
    random.Random(5).shuffle(order)
    for rid in order[:20]:  # whatever the two threads' interleaving, every read is whole and right
        assert seek.read([rid]) == {rid: clean[rid]}
    warming.join()
    no_whole_file(monkeypatch)  # indexed to the end: every read is one frame
    assert seek.read(order) == clean and seek.scans == 0
