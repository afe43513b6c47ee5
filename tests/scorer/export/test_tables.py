"""`bench export --format parquet|csv`: the shipped recording's results and exchanges, read back by DuckDB and pandas,
agree with `bench report --format json` on the same recording."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

from bench.cli import main
from bench.core.cassette import CassetteReader

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = ROOT / "cassettes" / "smollm2-135m-catalog.cassette"


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped cassette rescored once into a scores file, which report and export both read."""
    folder = tmp_path_factory.mktemp("shipped")
    (folder / SHIPPED.name).write_bytes(SHIPPED.read_bytes())
    assert main(["rescore", str(folder), "--jobs", "1", "--no-parse-cache"]) == 0
    return folder / "scores.jsonl"


@pytest.fixture(scope="module")
def report(scored: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("report") / "report.json"
    assert main(["report", str(scored), "--format", "json", "--out", str(out)]) == 0
    body: dict[str, Any] = json.loads(out.read_text())
    return body


def test_parquet_read_by_duckdb_has_the_reports_counts_and_pass_rate(
    scored: Path, report: dict[str, Any], tmp_path: Path
) -> None:
    assert main(["export", str(scored), "--format", "parquet", "--out", str(tmp_path)]) == 0
    results, exchanges = str(tmp_path / "results.parquet"), str(tmp_path / "exchanges.parquet")
    overall = next(r for r in report["rates"] if r["scope"] == "overall")
    counts = overall["counts"]
    row = duckdb.sql(
        f"select count(*), count(*) filter (where status = 'scored'), count(*) filter (where passed), "
        f"avg(passed::int) filter (where status = 'scored') from '{results}'"
    ).fetchall()[0]
    assert row[:3] == (counts["total"], counts["scored"], counts["passed"])
    assert row[3] == pytest.approx(overall["pass_rate"], abs=1e-12)
    n, tokens = duckdb.sql(f"select count(*), sum(output_tokens) from '{exchanges}'").fetchall()[0]
    assert n == report["traffic"]["exchanges"] == sum(1 for _ in CassetteReader(SHIPPED))
    assert tokens == sum(r["output_tokens"] for r in report["traffic"]["rows"])
    # Typed columns: a UTC timestamp, integers, a list of check structs.
    types = dict(duckdb.sql(f"select column_name, column_type from (describe select * from '{exchanges}')").fetchall())
    assert types["started"] == "TIMESTAMP WITH TIME ZONE" and types["ttft_us"] == "BIGINT"
    checks = duckdb.sql(f"select sum(len(checks)), sum(checks_total) from '{results}'").fetchall()[0]
    assert checks[0] == checks[1] > 0
    first = min(r.started for r in CassetteReader(SHIPPED))
    earliest = duckdb.sql(f"select epoch_us(min(started)) from '{exchanges}'").fetchall()[0]
    assert earliest == (first,)


def test_csv_read_by_pandas_has_one_row_per_result_and_exchange(
    scored: Path, report: dict[str, Any], tmp_path: Path
) -> None:
    assert main(["export", str(scored), "--format", "csv", "--out", str(tmp_path)]) == 0
    results = pd.read_csv(tmp_path / "results.csv")
    exchanges = pd.read_csv(tmp_path / "exchanges.csv")
    overall = next(r for r in report["rates"] if r["scope"] == "overall")
    assert len(results) == overall["counts"]["total"] and len(exchanges) == report["traffic"]["exchanges"]
    scored_rows = results[results["status"] == "scored"]
    assert scored_rows["passed"].astype(bool).mean() == pytest.approx(overall["pass_rate"])
    # Lists and structs are JSON text in CSV.
    assert all(len(json.loads(text)) == n for text, n in zip(results["checks"], results["checks_total"], strict=True))


def test_the_docs_three_line_analysis_runs_on_an_export(
    scored: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["export", str(scored), "--format", "parquet", "--out", str(tmp_path / "out")]) == 0
    doc = (ROOT / "docs" / "export.md").read_text()
    code = doc.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    exec(compile(code, "docs/export.md", "exec"), namespace)  # the docs' own lines, run as a reader would
    assert len(ast.parse(code).body) == 4  # the import and three statements


def test_without_out_or_with_an_unwritable_out_it_fails_in_one_line(
    scored: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", str(scored), "--format", "parquet"]) == 1
    assert "give --out FOLDER" in capsys.readouterr().err
    assert main(["export", str(scored), "--format", "csv", "--out", "/proc/no-such/dir"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("bench: error: cannot write to /proc/no-such/dir") and err.count("\n") == 1
