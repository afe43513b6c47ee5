"""Damaged cassettes: flipped bytes, cuts, junk. No traceback, no record returned changed, every loss reported.

A seeded loop (deterministic, so a failure is reproducible by its case number) damages real v2 files written by the
writer, closed (recompressed) and live (cut by kill -9), with small zstd frames so that damage meets frame bounds.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from bench.core.cassette import CassetteReader, CassetteWriter
from bench.core.cassette.records import Exchange, RunMeta
from bench.core.errors import CassetteError
from tests.bench.core.cassette.v1 import FIXTURE
from tests.support.records import exchange as make_exchange

WORDS = b"the quick brown fox jumps over a lazy dog while seven wise owls count stars".split()


def exchange(i: int, rng: random.Random) -> Exchange:
    n = rng.randint(3, 40)
    chunks = [b'data: {"choices":[{"delta":{"content":" %s"}}]}\n\n' % rng.choice(WORDS) for _ in range(n)]
    return make_exchange(
        {
            "id": f"x{i}",
            "started": 1_700_000_000_000_000 + i,
            "request": {"method": "POST", "path": "/v1/chat/completions", "query": "", "headers": [], "body": b"{}"},
            "response": {"status": 200, "headers": [], "chunks": chunks, "chunk_us": [rng.randint(0, 20000)] * n},
            "timing": {"end": 1000 + i},
            "tags": {"test": f"t{i % 7}"},
            "outcome": "complete",
        }
    )


@pytest.fixture
def small_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("bench.core.cassette.writer.SEGMENT_BYTES", 6000)
    monkeypatch.setattr("bench.core.cassette.compact.SEGMENT_BYTES", 6000)
    monkeypatch.setattr("bench.core.cassette.compact.BLOCK_BYTES", 1500)


def written(path: Path, n: int, *, close: bool) -> list[Exchange]:
    rng = random.Random(n)
    records = [exchange(i, rng) for i in range(n)]
    w = CassetteWriter(path, run=RunMeta(id="r"))
    for r in records:
        w.put(r)
        while w.stats.records < int(r.id[1:]) + 2:  # one batch per record: many blocks, many frames
            time.sleep(0.0005)
    if close:
        w.close()
    reader = CassetteReader(path)
    clean = list(reader)  # what the undamaged file reads as: every damaged read is compared with it
    assert [r.id for r in clean] == [r.id for r in records]
    assert [r.response.chunks for r in clean] == [r.response.chunks for r in records]
    assert (reader.problem is None) == close
    return clean


def damage(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    what = rng.choice(["flip", "flip", "flip", "flips", "cut", "junk", "zeros", "splice"])
    b = bytearray(data)
    if what == "flip":
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
    elif what == "flips":
        for _ in range(rng.randint(2, 6)):
            i = rng.randrange(len(b))
            b[i] = rng.randrange(256)
    elif what == "cut":
        del b[rng.randrange(len(b)) :]
    elif what == "junk":
        b += rng.randbytes(rng.randint(1, 3000))
    elif what == "zeros":
        i = rng.randrange(len(b))
        b[i : i + rng.randint(1, 600)] = bytes(min(len(b) - i, 600))
    else:
        i, j = sorted(rng.randrange(len(b)) for _ in range(2))
        b[i:i] = bytes(b[j : j + rng.randint(1, 400)])
    return bytes(b), what


def check(path: Path, originals: dict[str, Exchange]) -> tuple[int, str]:
    """Read a damaged file as every tool does; returns (records read, 'ok'|'error'|'damaged')."""
    try:
        reader = CassetteReader(path)
    except CassetteError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
        return 0, "error"
    got = list(reader)
    for record in got:
        assert record == originals.get(record.id), f"record {record.id} came back changed"
    ids = [r.id for r in got]
    assert len(ids) == len(set(ids)), "a record came back twice"
    if reader.problem is None:
        assert len(got) == len(originals) and reader.end is not None
        return len(got), "ok"
    assert "\n" not in reader.problem and str(path) in reader.problem
    if reader.end is not None:
        assert len(got) + reader.lost == len(originals), "a loss went uncounted"
    return len(got), "damaged"


@pytest.mark.parametrize("close", [True, False], ids=["closed", "live"])
def test_damaged_v2_files_never_change_a_record_and_report_every_loss(
    tmp_path: Path, small_frames: None, close: bool
) -> None:
    path = tmp_path / "good.cassette"
    originals = {r.id: r for r in written(path, 60, close=close)}
    data = path.read_bytes()
    rng = random.Random(1234)
    outcomes: dict[str, int] = {}
    recovered_after = 0
    flips: dict[str, int] = {}
    for case in range(250):
        bad = tmp_path / f"case{case}.cassette"
        damaged, what = damage(data, rng)
        bad.write_bytes(damaged)
        try:
            n, how = check(bad, originals)
        except AssertionError as exc:
            raise AssertionError(f"case {case} ({what}): {exc}") from None
        outcomes[how] = outcomes.get(how, 0) + 1
        recovered_after += how == "damaged" and n > 0
        if what == "flip":
            whole = "whole" if n == len(originals) else "lost"
            flips[whole] = flips.get(whole, 0) + 1
        bad.unlink()
    # One flipped bit in a finished frame is repaired from its repair frame: nothing lost (a live file's last frame
    # has none yet). Other damage is noticed, and most damaged files still give most of their records.
    assert flips.get("whole", 0) >= (0.95 if close else 0.8) * sum(flips.values()), flips
    assert outcomes.get("damaged", 0) > 60 and recovered_after > 50, outcomes


def test_records_after_damage_in_a_later_frame_are_recovered(tmp_path: Path, small_frames: None) -> None:
    path = tmp_path / "c.cassette"
    originals = {r.id: r for r in written(path, 60, close=True)}
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 200] = bytes(200)  # a run of zeros breaks the zstd stream of one frame
    path.write_bytes(bytes(data))
    reader = CassetteReader(path)
    got = [r.id for r in reader]
    assert got[0] == "x0" and got[-1] == "x59"  # before and after the damage
    assert 0 < reader.lost < 30 and len(got) + reader.lost == len(originals)
    assert reader.problem is not None and f"{reader.lost} record(s) lost" in reader.problem


def test_damaged_v1_files_give_no_traceback(tmp_path: Path) -> None:
    data = FIXTURE.read_bytes()
    rng = random.Random(99)
    for case in range(150):
        bad = tmp_path / f"v1-{case}.cassette"
        bad.write_bytes(damage(data, rng)[0])
        try:
            reader = CassetteReader(bad)
            list(reader)
        except CassetteError as exc:
            assert "\n" not in str(exc)
