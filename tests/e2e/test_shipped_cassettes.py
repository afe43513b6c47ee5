"""The recordings shipped in cassettes/ stay readable and rescorable as the format and the scorer evolve."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.cassette import CassetteReader, find_cassettes
from bench.cassette.format import FORMAT_VERSION
from bench.parse import parse_exchange
from scorer.pipeline import rescore

SHIPPED = Path(__file__).resolve().parents[2] / "cassettes"


def shipped() -> list[Path]:
    """The cassettes the repository ships: in a git checkout, the tracked ones only (`bench proxy` and `bench
    record` write ./cassettes by default, and a user's own recordings there are not the shipped ones)."""
    found = find_cassettes([SHIPPED]) if SHIPPED.is_dir() else []
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--", "."], cwd=SHIPPED, capture_output=True, check=True, timeout=30
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return found  # not a git checkout (an unpacked archive): everything there is what was shipped
    tracked = {(SHIPPED / name).resolve() for name in listed.decode().split("\0") if name}
    return [path for path in found if path.resolve() in tracked]


@pytest.mark.skipif(not shipped(), reason="no cassette shipped yet")
def test_every_shipped_cassette_reads_whole_and_parses() -> None:
    for path in shipped():
        reader = CassetteReader(path)
        records = list(reader)
        assert reader.header.version <= FORMAT_VERSION
        assert not reader.truncated, f"{path}: {reader.error}"
        assert len(records) >= 100
        parsed = [parse_exchange(r) for r in records]
        assert {p.model for p in parsed if p.model} == {"smollm2"}
        # Tool-calling tests were sent with their tools (SmolLM2-135M declines to call them unforced).
        assert any(b'"tools"' in r.request.body for r in records)


@pytest.mark.skipif(not shipped(), reason="no cassette shipped yet")
def test_shipped_recording_rescores_offline_against_the_current_catalog() -> None:
    meta, results = rescore(shipped(), jobs=1)
    assert results and meta.catalog_hash
    statuses = {r.status for r in results}
    assert statuses <= {"scored", "errored", "skipped", "stale", "unknown"}
    scored = [r for r in results if r.status == "scored"]
    assert len(scored) >= 100, "the shipped run still matches the catalog (not stale)"
    assert {r.epoch for r in scored} == {0, 1}
    assert all(r.failure_type for r in scored if not r.passed), "every real failure gets a type"
