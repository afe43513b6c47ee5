"""The one rescore path: spilled in sorted runs and merged, the same file whatever it spills and however many jobs;
flips by a merge join; nothing written when there is nothing to score or the earlier file is not a scores file."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from bench.catalog.model import Catalog, Check
from bench.core.cassette import CassetteWriter
from bench.core.cassette.records import Settings
from bench.core.errors import BenchError
from bench.scorer import sorted_runs
from bench.scorer.flips import find_flips, in_join_order
from bench.scorer.rescore import Request, Written, rescore
from bench.scorer.scores_io import read_scores
from bench.scorer.synth import exchange_record, sse_chunks
from tests.scorer.helpers import (
    CAPITAL,
    CATALOG,
    HASHES,
    WEATHER,
    make_catalog,
    record,
    write_cassette,
)

# Accepting Rome flips every weather result that answered Rome.
ROME = make_catalog(
    CAPITAL,
    dataclasses.replace(
        WEATHER, checks=(Check("tool_args", {"name": "get_weather", "args": {"city": {"one_of": ["Paris", "Rome"]}}}),)
    ),
)


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """Every kind of line: tagged results in several cassettes, a job recorded again by a resumed run (superseded),
    results without a run id in two cassettes with equal keys, untagged traffic, an unknown test."""
    folder = tmp_path / "runs"
    for part in range(3):
        recs = []
        for model in ("m1", "m2"):
            for epoch in range(4):
                city = "Rome" if (epoch + part) % 3 == 0 else "Paris"
                recs.append(record("t.capital", "Paris" if epoch % 2 else "Lyon", model=model, epoch=epoch + 4 * part))
                recs.append(record("t.weather", calls=[("get_weather", {"city": city})], model=model, epoch=epoch))
        recs.append(exchange_record(sse_chunks("untagged"), tags={}))
        recs.append(record("t.gone", "x", model="m1"))
        write_cassette(folder / f"p{part}.cassette", recs, tests=HASHES)
    for name, content in (("q0.cassette", "Paris"), ("q1.cassette", "Lyon")):
        with CassetteWriter(folder / name, settings=Settings(mode="record")) as w:
            w.put(record("t.capital", content, run=""))
            w.put(record("t.weather", calls=[("get_weather", {"city": "Rome"})], run="", id="x1"))
    return folder


def rescore_to_file(
    paths: list[Path], out: Path, *, catalog: Catalog, jobs: int = 1, previous: Path | None = None, **kw: Any
) -> Written:
    return rescore(Request(paths, catalog=catalog, jobs=jobs), out, previous=previous, **kw)


def test_spilled_at_every_unit_is_byte_identical_to_unspilled(
    runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unspilled = tmp_path / "whole" / "scores.jsonl"
    rescore_to_file([runs], unspilled, catalog=CATALOG)
    expected = unspilled.read_bytes()
    written = []
    real = sorted_runs._write_run
    monkeypatch.setattr(sorted_runs, "_write_run", lambda path, entries: written.append(path) or real(path, entries))
    # One result per run file: every merge path (many runs, FAN_IN merges of runs) is taken.
    monkeypatch.setattr(sorted_runs, "FAN_IN", 4)
    for jobs in (1, 2):
        out = tmp_path / f"spilled{jobs}" / "scores.jsonl"
        result = rescore_to_file([runs], out, catalog=CATALOG, jobs=jobs, spill_bytes=1)
        assert out.read_bytes() == expected, jobs
        assert result.tally.results == len(read_scores(out)[1])
        assert not list(out.parent.glob(".bench-spill-*")), "spill files are removed"
    assert len(written) > 20
    assert b"job(s) recorded in more than one cassette" in expected and b'"kind":"traffic"' in expected


def test_flips_by_merge_join_match_find_flips(runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "scores.jsonl"
    rescore_to_file([runs], out, catalog=CATALOG, spill_bytes=1)
    old_meta, old = read_scores(out)
    assert in_join_order(out)
    written = rescore_to_file([runs], out, catalog=ROME, previous=out, spill_bytes=1)
    new_meta, new = read_scores(out)
    expected = find_flips(old_meta, old, new_meta, new)
    assert written.flips == expected
    # m1 and m2 each answered Rome in some epochs, and the two results without a run id both did.
    weather = [f for f in expected if f.test == "t.weather"]
    assert len(weather) >= 4 and {f.cause for f in weather} == {"tool_args arguments changed"}
    assert sum(1 for f in weather if f.run == "") == 2


def test_flips_against_a_file_in_another_order(runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "scores.jsonl"
    rescore_to_file([runs], out, catalog=CATALOG)
    lines = out.read_bytes().splitlines(keepends=True)
    out.write_bytes(lines[0] + b"".join(reversed(lines[1:])))
    old_meta, old = read_scores(out)
    assert not in_join_order(out)
    written = rescore_to_file([runs], out, catalog=ROME, previous=out)
    new_meta, new = read_scores(out)
    assert written.flips == find_flips(old_meta, old, new_meta, new) and written.flips


def test_a_previous_file_that_is_not_scores_fails_before_any_work(runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "scores.jsonl"
    out.write_text("hello\n")
    with pytest.raises(BenchError, match="not a scores file"):
        rescore_to_file([runs], out, catalog=CATALOG, previous=out)
    assert out.read_text() == "hello\n"


def test_nothing_to_score_writes_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "empty"
    write_cassette(folder / "a.cassette", [], tests=HASHES)
    out = tmp_path / "scores.jsonl"
    with pytest.raises(BenchError, match="nothing to score"):
        rescore_to_file([folder], out, catalog=CATALOG)
    assert not out.exists() and not list(tmp_path.glob(".bench-spill-*"))
