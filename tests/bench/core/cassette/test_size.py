"""Cassette v2's size goals, on real traffic (compression is deterministic: these are not timing assertions)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.cli import main
from bench.cli.cassette_command import traffic_bytes
from bench.core.cassette import CassetteReader, CassetteWriter
from bench.core.cassette.compact import level_for
from bench.core.close_level import CLOSE_LEVEL_ENV

ROOT = Path(__file__).resolve().parents[4]
# The shipped recording (the catalog for SmolLM2, recorded 2026-12-03) closed at the writer's level 19: 27.8x its raw
# traffic, repair frames included. The ratio is the data's (the recording of 2026-11-30, other answers, was 28.3x):
# what is pinned is that the closed file keeps it, and that the levels rank as they should.
RATIO = 27.5
SHIPPED = ROOT / "cassettes" / "smollm2-135m-catalog.cassette"


def test_the_shipped_recording_is_v2_and_over_27x_smaller_than_its_traffic() -> None:
    reader = CassetteReader(SHIPPED)
    raw = sum(traffic_bytes(r) for r in reader)
    assert reader.version == 2 and reader.problem is None
    assert raw / SHIPPED.stat().st_size >= RATIO


def _rewritten(path: Path) -> float:
    """The shipped recording written again by the writer and closed: its records unchanged, its size ratio."""
    source = CassetteReader(SHIPPED)
    records = list(source)
    with CassetteWriter(path, settings=source.header.settings, run=source.header.run) as w:
        for record in records:
            w.put(record)
    again = CassetteReader(path)
    assert list(again) == records and again.problem is None
    return sum(traffic_bytes(r) for r in records) / path.stat().st_size


def test_a_recording_closed_by_the_writer_keeps_the_shipped_ratio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CLOSE_LEVEL_ENV, raising=False)  # the suite closes at level 6 (tests/conftest.py)
    assert _rewritten(tmp_path / "auto.cassette") >= RATIO


def test_the_close_level_setting_trades_size_for_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ratios = {}
    for value in ("off", "1", "6", "AUTO"):
        monkeypatch.setenv(CLOSE_LEVEL_ENV, value)
        ratios[value] = _rewritten(tmp_path / f"{value}.cassette")
    # Kept as written (level 3, a block flush per batch); recompressed in frames of SEGMENT_BYTES without the flushes,
    # level 1 does worse than that, 6 a little better for little CPU, 19 (auto, at this size) the most.
    assert ratios["1"] < ratios["off"] < ratios["6"] < ratios["AUTO"] and ratios["AUTO"] >= RATIO, ratios


@pytest.mark.parametrize("value", ["0", "23", "fast", "-1", "3.5"])
def test_a_close_level_that_is_no_zstd_level_stops_any_command_with_one_line(
    value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(CLOSE_LEVEL_ENV, value)
    assert main(["cassette", "ls", str(SHIPPED)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"bench: error: {CLOSE_LEVEL_ENV}={value!r} is not a zstd level: set it to 1-22, off or auto\n"
    )
    assert level_for(1 << 20) == 19  # code writing cassettes itself keeps the default
