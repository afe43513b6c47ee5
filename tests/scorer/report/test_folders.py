"""A folder's scores are found whatever bench named them, and cassettes in its subfolders (the pytest plugin's
<module>/<test>.cassette) are opened from where they are."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.scorer.report.load import load, scores_file
from bench.scorer.rescore import Request, rescore
from bench.view.detail import detail
from bench.view.index import open_index
from tests.scorer.helpers import CATALOG, record, write_cassette


def test_a_folder_s_scores_file_is_found_by_what_it_is_not_by_its_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cassette = write_cassette(tmp_path / "rec-1.cassette", [record("t.capital", "Paris")])
    (tmp_path / "notes.jsonl").write_text('{"kind": "note"}\n')  # JSON Lines, but not scores
    first = tmp_path / "rec-1.scores.jsonl"  # as `bench demo` names them
    rescore(Request([cassette], catalog=CATALOG), first)
    assert scores_file(tmp_path) == first
    assert load(tmp_path).source == str(first)
    second = tmp_path / "mine.jsonl"  # a `bench rescore --out` name
    second.write_bytes(first.read_bytes())
    os.utime(first, (1, 1))
    assert scores_file(tmp_path) == second
    assert capsys.readouterr().err.strip() == (
        f"bench: {tmp_path} holds 2 scores files; reading the newest, mine.jsonl (not rec-1.scores.jsonl): name a "
        "file to read another, or rescore the folder into one"
    )
    (tmp_path / "scores.jsonl").write_bytes(first.read_bytes())  # bench rescore's own name wins, silently
    assert scores_file(tmp_path) == tmp_path / "scores.jsonl" and not capsys.readouterr().err


def test_bench_view_opens_every_result_of_a_folder_of_module_subfolders(tmp_path: Path) -> None:
    """The pytest plugin's layout: tests/cassettes/<module>/<test>.cassette, untagged traffic, rescored in memory."""
    folder = tmp_path / "cassettes"
    for module, test in (("test_app", "test_one"), ("test_app", "test_two"), ("test_other", "test_three")):
        (folder / module).mkdir(parents=True, exist_ok=True)
        untagged = record("t.capital", test)
        untagged.tags = {}
        write_cassette(folder / module / f"{test}.cassette", [untagged])
    index = open_index([folder])
    assert len(index.rows) == 3
    for row in index.rows:
        opened = detail(index, row.n)  # "cannot open: No such file or directory" when the subfolder was dropped
        assert len(opened.exchanges) == 1 and not opened.missing, row.test
