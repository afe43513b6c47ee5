"""Cassette v2's size goals, on real traffic (compression is deterministic: these are not timing assertions)."""

from __future__ import annotations

from pathlib import Path

from bench.cassette import CassetteReader, CassetteWriter
from bench.cassette.cassette_command import traffic_bytes

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = ROOT / "cassettes" / "smollm2-135m-catalog.cassette"


def test_the_shipped_recording_is_v2_and_28x_smaller_than_its_traffic() -> None:
    reader = CassetteReader(SHIPPED)
    raw = sum(traffic_bytes(r) for r in reader)
    assert reader.version == 2 and reader.problem is None
    assert raw / SHIPPED.stat().st_size >= 28


def test_a_recording_closed_by_the_writer_is_28x_smaller_than_its_traffic(tmp_path: Path) -> None:
    source = CassetteReader(SHIPPED)
    records = list(source)
    path = tmp_path / "again.cassette"
    with CassetteWriter(path, settings=source.header.settings, run=source.header.run) as w:
        for record in records:
            w.put(record)
    again = CassetteReader(path)
    assert list(again) == records and again.problem is None
    assert sum(traffic_bytes(r) for r in records) / path.stat().st_size >= 28
