"""bench health: separating, flat, saturated and unstable tests over two runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli import main
from bench.scorer.report.health import health
from bench.scorer.report.load import load
from tests.scorer.report.factory import meta, result, write_scores


def runs(tmp_path: Path) -> list[Path]:
    paths = []
    for r in range(2):
        results = []
        for model in ("good", "bad"):
            for epoch in range(3):
                kw = {"model": model, "epoch": epoch, "run": f"r-{r}"}
                results.append(result("s.easy", passed=True, **kw))  # type: ignore[arg-type]
                results.append(result("s.hard", passed=False, **kw))  # type: ignore[arg-type]
                results.append(result("s.sep", passed=model == "good", **kw))  # type: ignore[arg-type]
                # Flaky for "good" in run 0 only (epoch 1 fails); always passes for "bad".
                ok = not (model == "good" and r == 0 and epoch == 1)
                results.append(result("s.flaky", passed=ok, **kw))  # type: ignore[arg-type]
        paths.append(write_scores(tmp_path / f"run{r}.jsonl", meta(), results))
    return paths


def test_verdicts(tmp_path: Path) -> None:
    h = health([load(p) for p in runs(tmp_path)])
    by = {t.test: t for t in h.tests}
    assert by["s.easy"].verdict == "all pass" and by["s.easy"].saturated_runs == 2
    assert by["s.hard"].verdict == "all fail"
    assert by["s.sep"].verdict == "separates" and by["s.sep"].spread == 1.0
    # good passes 5 of 6, bad 6 of 6: spread 1/6 < 0.5.
    assert by["s.flaky"].verdict == "weak" and by["s.flaky"].spread == pytest.approx(1 / 6)
    assert [t.test for t in h.saturated] == ["s.easy"]
    # Four (run, model) groups with 3 epochs each; one disagrees.
    assert [(t.test, t.unstable_groups, t.epoch_groups) for t in h.unstable] == [("s.flaky", 1, 4)]
    assert by["s.flaky"].saturated_runs == 1 and by["s.flaky"].runs == 2
    assert h.counts == {"all fail": 1, "all pass": 1, "separates": 1, "weak": 1}


def test_health_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = [str(p) for p in runs(tmp_path)]
    assert main(["health", *paths, "--format", "json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["saturated"] == ["s.easy"] and body["unstable"] == ["s.flaky"]
    assert main(["health", *paths]) == 0
    out = capsys.readouterr().out
    assert "Tests that separate models" in out and "Saturated across runs" in out and "Unstable across epochs" in out
