"""`bench record` of a small suite, tool calls included, against a real LLM server, then `bench rescore` offline."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from bench.core.cassette import find_cassettes, read_cassette
from bench.core.parse import parse_exchange
from bench.scorer.checked_catalog import load_catalog
from bench.scorer.scores_io import read_scores

pytestmark = pytest.mark.llm

TESTS = ["tools.weather_paris", "tools.capital_no_tool", "math.multiply"]


def bench(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench", *args], cwd=cwd, capture_output=True, text=True, timeout=600, check=False
    )


def test_record_and_rescore_against_smollm2(smollm2: str, tmp_path: Path) -> None:
    catalog = load_catalog()
    assert set(TESTS) <= set(catalog.tests)
    ids = ",".join(TESTS)
    rec = bench(
        "record", "--upstream", smollm2.removesuffix("/v1"), "--model", "smollm2", "--tests", ids,
        "--epochs", "1", "--concurrency", "1", "--out", str(tmp_path / "cas"), "--quiet",
        cwd=tmp_path,
    )  # fmt: skip
    assert rec.returncode == 0, rec.stderr
    [cassette] = find_cassettes([tmp_path / "cas"])
    header, exchanges = read_cassette(cassette)
    assert header.run.id, "the driver's run metadata is in the header"
    assert {x.tags["test"] for x in exchanges} == set(TESTS)
    assert all(x.tags["model"] == "smollm2" for x in exchanges)
    # A 135M model may or may not call the tool without tool_choice; the tool schemas must have been sent.
    assert any(b'"tools"' in x.request.body for x in exchanges)

    scores = tmp_path / "scores.jsonl"
    res = bench("rescore", str(tmp_path / "cas"), "--out", str(scores), "--jobs", "1", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    meta, results = read_scores(scores)
    assert meta.catalog_hash == catalog.hash
    assert {r.test for r in results} == set(TESTS)
    assert all(r.status in ("scored", "errored") for r in results)
    assert all(r.exchanges[-1].ttft_us is not None for r in results if r.status == "scored")
    failed = [r for r in results if r.status == "scored" and not r.passed]
    assert all(r.failure_type for r in failed), "every failure of the real model gets a type"


def test_one_fixed_seed_at_temperature_zero_gives_the_same_answer_every_epoch(smollm2: str, tmp_path: Path) -> None:
    """The determinism study llm-testbench users run: --seed N, temperature 0, N repeats. A single-slot llama.cpp
    server on one thread answers the same request the same way, so every epoch's answer is the first's, and the report
    names the seed mode instead of warning about it."""
    config = tmp_path / "bench.yaml"
    config.write_text("temperature: 0.0\nmax_tokens_default: 48\nconcurrency: 1\n")
    rec = bench(
        "record", "--config", str(config), "--upstream", smollm2.removesuffix("/v1"), "--model", "smollm2",
        "--tests", "math.multiply,extract.email_address", "--epochs", "3", "--seed", "5",
        "--out", str(tmp_path / "cas"), "--quiet", cwd=tmp_path,
    )  # fmt: skip
    assert rec.returncode == 0, rec.stderr
    [cassette] = find_cassettes([tmp_path / "cas"])
    _header, exchanges = read_cassette(cassette)
    texts: dict[str, set[str]] = {}
    for x in exchanges:
        if x.tags.get("test"):
            assert orjson.loads(x.request.body)["seed"] == 5  # every epoch: the one seed
            texts.setdefault(x.tags["test"], set()).add(parse_exchange(x).content)
    assert set(texts) == {"math.multiply", "extract.email_address"}
    assert all(len(answers) == 1 for answers in texts.values()), texts
    report = bench("report", str(tmp_path / "cas"), cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert "seed=5 (fixed)" in report.stdout and "seed varied" not in report.stdout
