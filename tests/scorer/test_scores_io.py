"""The scores file: written whole or not at all, read back line by line, bad files named in one line."""

from __future__ import annotations

from array import array
from pathlib import Path

import pytest

from bench.core.errors import BenchError
from bench.scorer.results import ExchangeScore, Meta, Result
from bench.scorer.scores_io import read_scores, write_scores

META = Meta(catalog_hash="sha256:c", evaluators={"contains_all": 1})


def result(test: str) -> Result:
    exchange = ExchangeScore(id="x1", itl_us=array("q", [5000, 6000]))
    return Result(test=test, passed=True, exchanges=[exchange])


def test_written_and_read_back_with_or_without_the_exchanges(tmp_path: Path) -> None:
    path = tmp_path / "scores.jsonl"
    write_scores(path, META, [result("a"), result("b")])
    meta, results = read_scores(path)
    assert meta == META and [r.exchanges[0].itl_us for r in results] == [[5000, 6000]] * 2
    assert (
        path.read_bytes()
        .splitlines()[1]
        .startswith(b'{"attempts":0,"calls":null,"cassette":"","catalog_test_hash":null,')
    )  # sorted
    _, slim = read_scores(path, exchanges=False)
    assert [(r.test, r.passed, r.exchanges) for r in slim] == [(t, True, []) for t in ("a", "b")]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "empty scores file"),
        (b'{"kind": "result"}\n', "not a bench scores file"),
        (b'{"kind": "meta", "format": "bench-scores", "version": 9}\n', "newer than this bench reads"),
        (b'{"kind": "meta", "format": "bench-scores", "version": 1}\n{not json\n', "bad JSON"),
        (b'{"kind": "meta", "format": "bench-scores", "version": 1}\n{"kind": "result", "epoch": "one"}\n', "line 2"),
        (b'{"kind": "meta", "format": "bench-scores", "version": 1, "cassettes": {}}\n', "line 1 is damaged"),
    ],
)
def test_bad_files_are_named_in_one_line(tmp_path: Path, content: bytes, problem: str) -> None:
    path = tmp_path / "scores.jsonl"
    path.write_bytes(content)
    with pytest.raises(BenchError, match=problem) as error:
        read_scores(path)
    assert str(path) in str(error.value) and "\n" not in str(error.value)
