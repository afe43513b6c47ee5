"""README.md's figures for the shipped recording, read from the README itself so the two cannot drift apart: its size
on disk and in raw traffic, its results and exchanges, its epochs and the pass rate a report shows."""

from __future__ import annotations

import re
from pathlib import Path

from bench.cli.cassette_command import traffic_bytes
from bench.core.cassette import CassetteReader
from tests.support.rescored import rescored as rescore

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "cassettes" / "smollm2-135m-catalog.cassette"


def test_the_readme_figures_of_the_shipped_recording() -> None:
    text = " ".join((ROOT / "README.md").read_text().split())
    size = re.search(r"\((\d+) KiB on disk, ([\d.]+) MiB of raw traffic: (\d+)x", text)
    counts = re.search(r"recorded for (\d+) epochs .*?: (\d+) results, (\d+) exchanges", text)
    rate = re.search(r"passes about (\d+)% of the catalog", text)
    assert size and counts and rate, "README.md no longer states the shipped recording's figures"
    records = list(CassetteReader(SHIPPED))
    raw = sum(traffic_bytes(r) for r in records)
    assert round(SHIPPED.stat().st_size / 1024) == int(size[1])
    assert round(raw / 2**20, 1) == float(size[2]) and int(raw / SHIPPED.stat().st_size) == int(size[3])
    _, results = rescore([SHIPPED], jobs=1)
    assert (len({r.epoch for r in results}), len(results), len(records)) == tuple(map(int, counts.groups()))
    scored = [r for r in results if r.status == "scored"]
    assert round(100 * sum(bool(r.passed) for r in scored) / len(scored)) == int(rate[1])
