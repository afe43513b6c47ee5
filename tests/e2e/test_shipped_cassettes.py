"""The recordings shipped in cassettes/ stay readable and rescorable as the format and the scorer evolve."""

from __future__ import annotations

import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from bench.core.cassette import CassetteReader, find_cassettes
from bench.core.cassette.format import FORMAT_VERSION
from bench.core.parse import parse_exchange
from tests.support.rescored import rescored as rescore

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
    # What each job's result must say, read from the recording itself: every attempt of every job, and whether the
    # final attempt of its last turn got a usable answer (a complete exchange with a 2xx status) or not.
    attempts: dict[tuple[str, str, int], list[tuple[int, int, int | None, str]]] = defaultdict(list)
    for path in shipped():
        for record in CassetteReader(path):
            tags = record.tags
            key = (tags["test"], tags["model"], int(tags["epoch"]))
            attempts[key].append((int(tags["turn"]), int(tags["attempt"]), record.response.status, record.outcome))
    want = {}
    for key, tried in attempts.items():
        _turn, _attempt, status, outcome = max(tried)
        usable = outcome == "complete" and status is not None and 200 <= status < 300
        want[key] = ("scored" if usable else "errored", len(tried))
    assert {(r.test, r.model, r.epoch): (r.status, r.attempts) for r in results} == want
    # The recording holds both kinds, so the comparison above checks each.
    assert {status for status, _ in want.values()} == {"scored", "errored"}
    scored = [r for r in results if r.status == "scored"]
    assert len(scored) >= 100, "the shipped run still matches the catalog (not stale)"
    assert {r.epoch for r in scored} == {0, 1}
    assert all(r.failure_type for r in scored if not r.passed), "every real failure gets a type"
