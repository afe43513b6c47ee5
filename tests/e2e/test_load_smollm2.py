"""A GuideLLM-style sweep against a real model (SmolLM2-135M on llama.cpp): the report names a saturation point
and its charts of each metric against load are laid out by headless Chromium, a point per level. Nothing here
asserts where the model saturates (that is the machine's): benchmarks/load_smollm2_sweep.py measures it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.core.cassette import CassetteReader, find_cassettes
from tests.support.chromium import CHROMIUM, measured
from tests.support.llm_server import gguf_path

pytestmark = pytest.mark.llm
ROOT = Path(__file__).resolve().parents[2]


def bench(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium package (/usr/bin/chromium) to render")
def test_a_sweep_against_smollm2_finds_its_saturation_and_draws_its_curves(smollm2: str, tmp_path: Path) -> None:
    model = gguf_path()
    assert model is not None
    out = tmp_path / "sweep"
    bench(
        "load", "--upstream", smollm2.removesuffix("/v1"), "--model", "smollm2", "--sweep", "4", "--requests", "6",
        "--throughput-concurrency", "3", "--arrival", "constant", "--synthetic", "input=24,output=12",
        "--tokenizer", str(model), "--ignore-eos", "--slo", "ttft:2000", "--out", str(out),
    )  # fmt: skip
    (cassette,) = find_cassettes([out])
    exchanges = list(CassetteReader(cassette))
    assert len(exchanges) == 24 and all(e.response.status == 200 for e in exchanges)
    body = json.loads(bench("report", str(out), "--format", "json"))
    levels = body["levels"]
    assert [r["kind"] for r in levels["rows"]] == ["synchronous", "throughput", "rate", "rate"]
    assert all(r["completed"] == 6 and r["output_tokens"] == 72 for r in levels["rows"])  # min_tokens honoured
    saturation = levels["saturation"]
    assert saturation["basis"] == "rate" and saturation["says"] and saturation["max_throughput"] > 0
    html = tmp_path / "sweep.html"
    bench("report", str(out), "--out", str(html))
    charts = measured(html.read_text(), tmp_path)
    for name in ("throughput", "tokens", "ttft", "itl", "e2el", "shares", "late"):
        chart = charts[f"chart-load-{name}"]
        assert chart["width"] > 300 and chart["series"] >= 1, chart
        assert chart["points"] and all(drawn and inside for _, drawn, inside in chart["points"]), chart
    # A sweep mixes closed and open levels: each is placed at the rate it sent; four levels, four points a series.
    assert len(charts["chart-load-ttft"]["points"]) == 2 * 4
