"""`bench view`'s index over a scores file: one row per result, the rest read again from the file and the cassette
when a result is opened, and the same view whether the run was scored into a file or its cassettes rescored."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench.core.errors import BenchError
from bench.scorer.scores_io import read_scores
from bench.view.detail import detail
from bench.view.index import Index, open_index


def test_a_scores_file_leaves_rows_and_reads_results_again(smollm2_dir: Path, smollm2_index: Index) -> None:
    _, results = read_scores(smollm2_dir / "scores.jsonl")
    assert len(smollm2_index.rows) == len(results)
    assert [smollm2_index.result(n) for n in range(len(results))] == results


def test_the_same_view_from_its_cassettes(smollm2_dir: Path, smollm2_index: Index, tmp_path: Path) -> None:
    cassette = next(smollm2_dir.glob("*.cassette"))
    shutil.copy(cassette, tmp_path / cassette.name)
    in_memory = open_index([tmp_path])  # no scores.jsonl there: its cassettes rescored
    assert in_memory.rows == smollm2_index.rows
    assert [r.models for r in in_memory.runs] == [r.models for r in smollm2_index.runs]
    row = next(r for r in smollm2_index.rows if r.passed is False)
    assert detail(in_memory, row.n) == detail(smollm2_index, row.n)


def test_opening_a_result_reads_its_cassette_through_the_seek_index(smollm2_dir: Path) -> None:
    index = open_index([smollm2_dir])
    for row in reversed(index.rows[-5:]):
        assert not detail(index, row.n).missing
    (seek,) = index._seek.values()
    assert seek.scans == 0 and seek.seeks == 5


def test_a_scores_file_changed_under_the_view_is_one_line(smollm2_dir: Path, tmp_path: Path) -> None:
    for item in smollm2_dir.iterdir():
        shutil.copy(item, tmp_path / item.name)
    index = open_index([tmp_path])
    scores = tmp_path / "scores.jsonl"
    lines = scores.read_bytes().splitlines(keepends=True)
    scores.write_bytes(lines[0] + b"".join(reversed(lines[1:])))  # the same results, at other offsets
    with pytest.raises(BenchError, match="changed since bench view read it") as err:
        detail(index, index.rows[3].n)
    assert "\n" not in str(err.value)


def test_cassettes_are_indexed_in_the_background(smollm2_dir: Path) -> None:
    index = open_index([smollm2_dir])
    index.warm_in_background().join()
    (seek,) = index._seek.values()
    assert len(seek.spots) == 212 and seek.seeks == 0  # indexed, nothing read yet
    row = index.rows[-1]
    assert not detail(index, row.n).missing
    assert seek.seeks == 1 and seek.scans == 0
