"""Repair frames: one flipped byte anywhere in a closed cassette loses nothing, on a small file and on a large one;
damage beyond repair is read as before, never as a changed record."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bench.core.cassette import CassetteReader, CassetteWriter, repair
from bench.core.cassette.records import Exchange
from tests.support.records import exchange

ROOT = Path(__file__).resolve().parents[4]
SHIPPED = ROOT / "cassettes" / "smollm2-135m-catalog.cassette"


def _small(path: Path) -> list[Exchange]:
    """21 short streamed exchanges, as a small test suite records them."""
    records = []
    with CassetteWriter(path) as w:
        for i in range(21):
            chunks = [b'data: {"choices":[{"index":0,"delta":{"content":" w%d"}}]}\n\n' % j for j in range(i % 7 + 3)]
            rec = exchange(id=f"x{i}", request={"method": "POST", "path": "/v1/chat/completions", "body": b"{}"},
                           response={"status": 200, "chunks": chunks, "chunk_us": [900] * len(chunks)})  # fmt: skip
            w.put(rec)
            records.append(rec)
    return list(CassetteReader(path))


def _large(path: Path) -> list[Exchange]:
    """The shipped recording (212 exchanges of SmolLM2) written again and closed by today's writer."""
    records = list(CassetteReader(SHIPPED))
    with CassetteWriter(path) as w:
        for record in records:
            w.put(record)
    return records


@pytest.mark.parametrize("make", [_small, _large], ids=["21 exchanges", "shipped recording"])
def test_one_flipped_bit_anywhere_loses_nothing(make: object, tmp_path: Path) -> None:
    path = tmp_path / "c.cassette"
    originals = make(path)  # type: ignore[operator]
    data = path.read_bytes()
    rng = random.Random(7)
    for place in sorted(rng.sample(range(len(data)), 40)):
        bad = bytearray(data)
        bad[place] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(bad))
        reader = CassetteReader(path)
        assert list(reader) == originals and reader.lost == 0, f"byte {place} of {len(data)}"
        # A flip in a repair frame's own magic or size makes it junk, skipped and said; nothing else is.
        assert reader.problem is None or "bytes that are not zstd data" in reader.problem


def test_damage_beyond_repair_is_read_as_before(tmp_path: Path) -> None:
    """Two stretches of one frame damaged: the records up to the damage, said, none changed."""
    path = tmp_path / "c.cassette"
    originals = _large(path)
    data = bytearray(path.read_bytes())
    end = data.find(repair.MAGIC, 1000)  # the end of the one record frame
    for at in (end // 3, 2 * end // 3):
        data[at : at + 4] = bytes(4)
    path.write_bytes(bytes(data))
    reader = CassetteReader(path)
    got = list(reader)
    by_id = {r.id: r for r in originals}
    assert 0 < len(got) < len(originals) and all(r == by_id[r.id] for r in got)
    assert reader.problem is not None and "lost to damage" in reader.problem


def test_a_damaged_repair_frame_is_never_used(tmp_path: Path) -> None:
    path = tmp_path / "c.cassette"
    originals = _small(path)
    data = bytearray(path.read_bytes())
    at = data.rfind(repair.MAGIC)
    data[at + 30] ^= 0x10  # inside the last repair frame's parity
    path.write_bytes(bytes(data))
    reader = CassetteReader(path)
    assert list(reader) == originals and reader.lost == 0
    assert reader.problem is not None and "bytes that are not zstd data" in reader.problem  # skipped, and said
