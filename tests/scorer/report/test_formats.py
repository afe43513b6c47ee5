"""bench report in every format, on a scores file, a folder, and a folder of cassettes rescored."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from bench.cli import main
from bench.core.cassette import CassetteWriter
from bench.core.cassette.records import RunMeta
from bench.scorer.report.formats import FORMATS, Document, Target, names, output_format
from tests.scorer.report.factory import meta, synthetic, write_scores
from tests.support.records import exchange


@pytest.fixture
def scores(tmp_path: Path) -> Path:
    return write_scores(tmp_path / "scores.jsonl", meta(), synthetic(400, models=3, epochs=4))


def test_json_carries_every_number(scores: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(scores), "--format", "json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["format"] == "bench-report" and body["models"] == ["model-a", "model-b", "model-c"]
    overall = [r for r in body["rates"] if r["scope"] == "overall"]
    assert sum(r["counts"]["total"] for r in overall) == 400
    for row in overall:
        c = row["counts"]
        assert row["pass_rate"] == pytest.approx(c["passed"] / c["scored"])
        assert row["low"] <= row["pass_rate"] <= row["high"]
    timing = body["timing"]["model-a"]
    assert timing["itl_ms"]["count"] >= 50 * timing["streamed"]
    assert timing["ttft_ms"]["p50"] <= timing["ttft_ms"]["p90"] <= timing["ttft_ms"]["p99"]
    assert body["timing"]["model-c"]["tokens_counted"] > 0  # the factory marks the last model's tokens as counted
    assert {e["k"] for e in body["epochs"]} == {1, 2, 4}
    assert body["run"]["catalog_hash"] == meta()["catalog_hash"]


def test_table_markdown_and_html(scores: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(scores)]) == 0
    table = capsys.readouterr().out
    for title in ("Pass rate by category", "Epochs", "Timing", "Failure types", "Retries and errors", "Models and"):
        assert title in table
    assert main(["report", str(scores.parent), "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert re.search(r"^\| model-a \| \d+\.\d% \| \[", md, re.MULTILINE)
    assert "* some token counts were counted" in md
    out = tmp_path / "r.html"
    assert main(["report", str(scores), "--out", str(out)]) == 0  # format from the suffix
    html = out.read_text()
    assert html.startswith("<!DOCTYPE html>") and html.count("<svg") >= 6
    # Self-contained: nothing is fetched.
    assert not re.search(r"(src|href)\s*=|https?://|<script|@import|url\(", html)


def test_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "missing")]) == 1
    assert "no such file or folder" in capsys.readouterr().err
    (tmp_path / "x.jsonl").write_text('{"hello": 1}\n')
    assert main(["report", str(tmp_path / "x.jsonl")]) == 1
    assert "not a bench scores file" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", str(empty)]) == 1
    assert "no scores file and no *.cassette" in capsys.readouterr().err
    newer = tmp_path / "newer.jsonl"
    newer.write_text(json.dumps({**meta(), "version": 99}) + "\n")
    assert main(["report", str(newer)]) == 1
    assert "upgrade bench" in capsys.readouterr().err


def test_folder_of_cassettes_is_rescored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("bench.scorer.rescore", reason="the scorer pipeline is not in this tree yet")
    folder = tmp_path / "rec"
    body = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'
    with CassetteWriter(folder / "a.cassette", run=RunMeta(id="r-9")) as w:
        w.put(
            exchange(
                {
                    "id": "x1",
                    "request": {
                        "method": "POST",
                        "path": "/v1/chat/completions",
                        "query": "",
                        "headers": [],
                        "body": body,
                    },
                    "response": {
                        "status": 200,
                        "headers": [["Content-Type", "application/json"]],
                        "chunks": [b'{"model":"m","choices":[{"message":{"role":"assistant","content":"hello"}}]}'],
                        "chunk_us": [900],
                        "streamed": False,
                    },
                    "timing": {"end": 1000},
                    "outcome": "complete",
                    "tags": {"test": "nowhere.no_such_test", "model": "m", "run": "r-9", "epoch": "0"},
                }
            )
        )
    assert main(["report", str(folder), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["source"].endswith("(rescored)")
    assert not (folder / "scores.jsonl").exists()
    overall = [r for r in report["rates"] if r["scope"] == "overall"]
    assert [r["model"] for r in overall] == ["m"] and overall[0]["counts"]["unknown"] == 1


@pytest.mark.parametrize("command", ["report", "rescore"])
def test_a_folder_of_unreadable_cassettes_is_an_error_not_an_empty_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    (tmp_path / "a.cassette").write_bytes(b"")
    (tmp_path / "b.cassette").write_bytes(b"\x28\xb5\x2f\xfd not zstd after all")
    assert main([command, str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip().splitlines()
    assert err[-1].startswith("bench: error: nothing to score in ")
    assert any("a.cassette" in line and "0-byte" in line for line in err)
    assert any("b.cassette" in line for line in err)
    assert not (tmp_path / "scores.jsonl").exists()


def _strict_json(text: str) -> Any:
    """json.loads that refuses NaN and Infinity, which are not JSON (Python's json would read them)."""

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("command", ["compare", "health"])
def test_compare_and_health_json_with_nan_is_valid_json(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Fault injection: the real comparison / health result with a NaN and an infinity planted in it, as an odd
    # division would leave them; the JSON must carry null there, like `bench report`'s.
    from bench.scorer.report import compare, health

    a = write_scores(tmp_path / "a.jsonl", meta(), synthetic(60, models=2, epochs=2))
    b = write_scores(tmp_path / "b.jsonl", meta(), synthetic(60, seed=2, models=2, epochs=2))
    real_compare, real_health = compare.compare, health.HealthTally.finish

    def nan_compare(*args: Any) -> compare.Comparison:
        result = real_compare(*args)
        planted = next(d for d in result.deltas if d.rate_b is not None)
        planted.p_value, planted.rate_b = math.nan, math.inf
        return result

    def nan_health(*args: Any) -> health.Health:
        result = real_health(*args)
        result.separation = math.nan
        result.tests[0].model_rates["model-a"] = -math.inf
        return result

    monkeypatch.setattr(compare, "compare", nan_compare)
    monkeypatch.setattr(health.HealthTally, "finish", nan_health)  # bench health tallies run by run, then finishes
    assert main([command, str(a), str(b), "--format", "json"]) == 0
    body = _strict_json(capsys.readouterr().out)
    if command == "compare":
        planted = next(d for d in body["deltas"] if d["p_value"] is None)
        assert planted["rate_b"] is None
        assert sum(d["p_value"] is None for d in body["deltas"]) == 1
    else:
        assert body["separation"] is None and body["tests"][0]["model_rates"]["model-a"] is None
        assert isinstance(body["tests"][0]["model_rates"]["model-b"], float)


def test_a_format_is_one_registration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A renderer registered under a new name is offered by all three commands and picked by --out's suffix."""

    @output_format("_test_csv", suffixes=(".csv",))
    def csv(doc: Document, target: Target) -> str:
        return "".join(f"{s.title},{len(s.rows)}\n" for s in doc.sections)

    try:
        assert "_test_csv" in names(report=True) and "_test_csv" in names(report=False)
        assert "html" in names(report=True) and "html" not in names(report=False)
        scores = write_scores(tmp_path / "s.jsonl", meta(), synthetic(40, models=2, epochs=2))
        out = tmp_path / "r.csv"
        assert main(["report", str(scores), "--out", str(out)]) == 0
        assert out.read_text().startswith("Summary,") or "," in out.read_text().splitlines()[0]
        assert main(["health", str(scores), "--format", "_test_csv"]) == 0
        assert capsys.readouterr().out.count(",") >= 1
        with pytest.raises(RuntimeError, match="registered twice"):
            output_format("_test_csv")(csv)
    finally:
        del FORMATS["_test_csv"]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["report", "{s}", "--out", "{d}/r.docx"],
            "bench writes text, not .docx files; name the file .txt, .md, .json, ",
        ),
        (["report", "{s}", "--format", "markdown", "--out", "{d}/r.docx"], "bench writes text, not .docx files"),
        (["compare", "{s}", "{s}", "--out", "{d}/c.html"], "this command writes no html; use table, markdown, json"),
        (["health", "{s}", "--out", "{d}/h.pdf"], "bench writes text, not .pdf files; name the file .txt, .md, .json"),
    ],
)
def test_an_out_file_whose_suffix_names_no_format_it_gets_is_refused_before_any_work(
    argv: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "missing")  # never read: the refusal comes first
    assert main([a.format(s=missing, d=tmp_path) for a in argv]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err
    assert not list(tmp_path.iterdir())


def test_an_out_file_s_suffix_picks_the_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scores = Path(__file__).resolve().parents[3] / "cassettes"
    for name, check in (("r.md", "# bench report"), ("r.json", '"format": "bench-report"'), ("r.txt", "Pass rate")):
        assert main(["report", str(scores), "--out", str(tmp_path / name)]) == 0
        assert check in (tmp_path / name).read_text()
