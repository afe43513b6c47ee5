"""What the numbers cannot show is said wherever they are shown: a run interrupted before it finished, timing a
replaying proxy replayed, answers the server closed without a finish_reason, answers stopped at the token limit.
Checked in `bench report` (table, markdown, json, html), `bench compare`, `bench health` and `bench view`'s API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest

from bench.cli import main
from bench.core.cassette import CassetteWriter
from bench.core.cassette.records import End, Exchange, ReplayOf, RunMeta, Settings
from bench.scorer.rescore import Request, rescore
from bench.view.index import open_index
from tests.scorer.helpers import CATALOG, HASHES, record


def _with_finish(rec: Exchange, finish: bytes) -> Exchange:
    """The record with its stream's finish_reason replaced by `finish` (a JSON value)."""
    chunks = [c.replace(b'"finish_reason":"stop"', b'"finish_reason":' + finish) for c in rec.response.chunks]
    return msgspec.structs.replace(rec, response=msgspec.structs.replace(rec.response, chunks=chunks))


def _cassette(path: Path, records: list[Exchange], *, interrupted: bool = False) -> None:
    w = CassetteWriter(path, settings=Settings(mode="record"), run=RunMeta(id=path.stem, tests=HASHES))
    for i, rec in enumerate(records):
        w.put(msgspec.structs.replace(rec, id=f"x{i}"))
    w.close(End(interrupted=True) if interrupted else None)


@pytest.fixture
def scores(tmp_path: Path) -> Path:
    """run-a: interrupted; its answers: one stopped at the token limit (failing), one closed without a finish_reason.
    run-b: recorded by a replaying proxy (every exchange a replay)."""
    run_a = [
        _with_finish(record("t.capital", "The capital is P", run="run-a", epoch=0), b'"length"'),
        _with_finish(record("t.capital", "Pa", run="run-a", epoch=1), b"null"),
        record("t.capital", "Paris", run="run-a", epoch=2),
    ]
    replay = ReplayOf(cassette="run-a.cassette", id="x0")
    run_b = [
        msgspec.structs.replace(record("t.capital", "Paris", run="run-b", epoch=e), replay_of=replay, mode="replay")
        for e in range(3)
    ]
    _cassette(tmp_path / "run-a.cassette", run_a, interrupted=True)
    _cassette(tmp_path / "run-b.cassette", run_b)
    out = tmp_path / "scores.jsonl"
    rescore(Request([tmp_path], catalog=CATALOG), out)
    return out


SAID = (
    "cassette run-a.cassette: its run was interrupted before it finished: some tests may be missing",
    "cassette run-b.cassette: 3 exchange(s) were served by a replaying proxy: their TTFT/ITL/E2EL are the "
    "recording's timing replayed, not measured",
    "m1: 1 of 6 result(s) end in a stream the server closed without a finish_reason",
)


def _said(text: str) -> None:
    flat = " ".join(text.split())
    for line in SAID:
        assert line in flat, line


@pytest.mark.parametrize("fmt", ["table", "markdown", "json", "html"])
def test_the_report_says_them_in_every_format(scores: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(scores), "--format", fmt]) == 0
    text = capsys.readouterr().out
    _said(text.replace("&#x27;", "'"))
    if fmt == "json":
        doc = orjson.loads(text)
        (row,) = doc["reliability"]
        assert (row["max_tokens"], row["no_finish_reason"]) == (1, 1)
        assert doc["replayed_timing"] == ["m1"]
        assert doc["failures"]["m1"]["max_tokens"] == 1
    else:
        assert "max_tokens" in text and "no finish_reason" in text and "m1 (replayed)" in text


def test_compare_says_them_for_each_side(scores: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(scores), str(scores), "--format", "json"]) == 0
    warnings = orjson.loads(capsys.readouterr().out)["warnings"]
    for side in ("A", "B"):
        for line in SAID:
            assert any(w.startswith(f"{side}: {line}") for w in warnings), (side, line)
    assert "A is an interrupted run: its missing tests are not regressions" in warnings


def test_health_says_them_for_each_run(scores: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["health", str(scores)]) == 0
    _said(capsys.readouterr().out)


def test_bench_view_says_them_above_the_runs_and_flags_each_result(scores: Path) -> None:
    index = open_index([scores])
    for line in SAID:
        assert any(w.startswith(line) for w in index.warnings), line
    flags: dict[tuple[str, int], Any] = {(r.run, r.epoch): r.flags for r in index.rows}
    # run-a was interrupted: each of its results says so too (bench view's own flag).
    assert flags[("run-a", 0)] == ["max_tokens", "interrupted run"]
    assert flags[("run-a", 1)] == ["no_finish_reason", "interrupted run"]
    assert flags[("run-a", 2)] == ["interrupted run"] and all(
        flags[("run-b", e)] == ["replayed timing"] for e in range(3)
    )


def test_the_rescore_summary_says_them_too(scores: Path) -> None:
    import io

    from rich.console import Console

    from bench.scorer.rescore_summary import print_summary
    from bench.scorer.scores_io import read_scores

    meta, results = read_scores(scores)
    buffer = io.StringIO()
    print_summary(Console(file=buffer, width=400), meta, results, None, str(scores))
    _said(buffer.getvalue())
