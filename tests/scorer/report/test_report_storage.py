"""`bench report` and `bench compare` on object storage: moto's real S3 server on 127.0.0.1, s3fs as the client.
A scores file at a URL reads as the same file on disk; a prefix of cassettes is rescored where it is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.cli import main
from tests.scorer.report.factory import meta, result, write_scores
from tests.support.s3 import BUCKET

pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

SHIPPED = Path(__file__).resolve().parents[3] / "cassettes"


def test_report_and_compare_read_scores_files_on_s3(s3: Any, tmp_path: Path) -> None:
    a = write_scores(tmp_path / "a.jsonl", meta(), [result("t.a", "m"), result("t.b", "m", passed=False)])
    b = write_scores(tmp_path / "b.jsonl", meta(), [result("t.a", "m"), result("t.b", "m")])
    s3.put_file(str(a), f"{BUCKET}/runs/a/scores.jsonl")
    s3.put_file(str(b), f"{BUCKET}/runs/a/b.jsonl")
    local, remote = tmp_path / "local.json", tmp_path / "remote.json"
    assert main(["report", str(a), "--format", "json", "--out", str(local)]) == 0
    # A prefix holding scores.jsonl reads as a folder holding it does.
    assert main(["report", f"s3://{BUCKET}/runs/a", "--format", "json", "--out", str(remote)]) == 0
    assert remote.read_text().replace(f"s3://{BUCKET}/runs/a/scores.jsonl", str(a)) == local.read_text()
    out = tmp_path / "compare.md"
    assert (
        main(["compare", f"s3://{BUCKET}/runs/a/scores.jsonl", f"s3://{BUCKET}/runs/a/b.jsonl", "--out", str(out)]) == 0
    )
    assert main(["compare", str(a), str(b), "--format", "markdown", "--out", str(tmp_path / "l.md")]) == 0
    assert main(
        ["compare", f"s3://{BUCKET}/runs/a", f"s3://{BUCKET}/runs/a/b.jsonl", "--format", "markdown", "--out", str(out)]
    ) == 0  # fmt: skip
    expected = (tmp_path / "l.md").read_text().replace(str(a), f"s3://{BUCKET}/runs/a/scores.jsonl")
    expected = expected.replace(str(b), f"s3://{BUCKET}/runs/a/b.jsonl").replace(str(tmp_path), f"s3://{BUCKET}/runs/a")
    # The cassette behind a result is named next to the scores file, on S3: `bench cassette show` reads it there.
    assert f"bench cassette show s3://{BUCKET}/runs/a/run.cassette" in out.read_text() and out.read_text() == expected


def test_report_rescores_cassettes_on_s3(s3: Any, tmp_path: Path) -> None:
    (shipped,) = sorted(SHIPPED.glob("*.cassette"))[:1]
    s3.put_file(str(shipped), f"{BUCKET}/rec/{shipped.name}")
    out = tmp_path / "r.json"
    assert main(["report", f"s3://{BUCKET}/rec", "--format", "json", "--out", str(out)]) == 0
    assert "rescored" in out.read_text()


def test_missing_scores_on_s3_is_one_line(s3: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", f"s3://{BUCKET}/nothing/scores.jsonl"]) == 1
    err = capsys.readouterr().err
    assert "no such scores file" in err and len(err.strip().splitlines()) == 1
    assert main(["report", "s3://no-such-bucket-here/x"]) == 1
    err = capsys.readouterr().err
    assert "no-such-bucket-here" in err and len(err.strip().splitlines()) == 1
