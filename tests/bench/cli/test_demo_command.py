"""`bench demo` end to end: the oracle scores 100% once the scorer exists, each flawed model fails its own way."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from bench.cli import main
from bench.cli.demo_command import DEMO_MODELS, run

if TYPE_CHECKING:
    from bench.scorer.results import Result

HAVE_SCORER = importlib.util.find_spec("bench.scorer.rescore") is not None


def test_demo_records_scores_and_says_what_next(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # As a newcomer runs it, from a clone whose cassettes/ holds the shipped recordings: those stay untouched.
    shipped = tmp_path / "cassettes"
    shipped.mkdir()
    (shipped / "shipped.cassette").write_bytes(b"the shipped recording")
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--quiet", "--epochs", "2"]) == 0
    assert [p.name for p in shipped.iterdir()] == ["shipped.cassette"]
    printed = capsys.readouterr().out
    (cassette,) = Path("runs/demo").glob("*.cassette")
    assert f"cassette: {cassette}" in printed and "next:" in printed
    if not HAVE_SCORER:
        pytest.skip("the scorer is not installed: recording checked, scoring skipped")
    from bench.scorer.scores_io import read_scores

    _meta, results = read_scores(cassette.with_suffix(".scores.jsonl"))
    by_model: dict[str, list[Result]] = {m: [] for m in DEMO_MODELS}
    for r in results:
        by_model[str(r.model)].append(r)
    oracle = by_model["oracle"]
    assert oracle and all(r.passed for r in oracle), [r.test for r in oracle if not r.passed]
    assert {r.failure_type for r in by_model["flawed-no-call"] if not r.passed} >= {"no_call"}
    assert {r.failure_type for r in by_model["flawed-invalid-json"] if not r.passed} >= {"invalid_json"}
    # The folder's scores are the demo's own file, whatever it is named: `bench report runs/demo` and `bench view
    # runs/demo` read it rather than rescoring every cassette in memory (45 s against 0.6 s).
    import orjson

    from bench.view.index import open_index

    assert main(["report", "runs/demo", "--format", "json"]) == 0
    assert orjson.loads(capsys.readouterr().out)["source"] == str(cassette.with_suffix(".scores.jsonl"))
    index = open_index([Path("runs/demo")])
    assert [s.source for s in index.sources] == [str(cassette.with_suffix(".scores.jsonl"))]
    # Two epochs send seeds 7 and 8 (per-epoch): the report names the mode and does not warn about its own seeds.
    assert "seed=7 + epoch (per-epoch)" in printed and "seed varied" not in printed


def test_demo_refuses_zero_epochs(tmp_path: Path) -> None:
    from bench.core.errors import BenchError

    with pytest.raises(BenchError, match="--epochs must be at least 1"):
        run(argparse.Namespace(out=tmp_path, epochs=0, quiet=True))
