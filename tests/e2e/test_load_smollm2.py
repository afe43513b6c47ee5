"""A GuideLLM-style sweep against a real model (SmolLM2-135M on llama.cpp): the report names a saturation point
and its charts of each metric against load are laid out by headless Chromium, a point per level. Nothing here
asserts where the model saturates (that is the machine's): benchmarks/load_smollm2_sweep.py measures it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.core.cassette import CassetteReader, find_cassettes
from bench.core.cassette.records import Exchange
from tests.support.chromium import CHROMIUM, measured
from tests.support.llm_server import gguf_path

pytestmark = pytest.mark.llm
ROOT = Path(__file__).resolve().parents[2]


def bench(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def sse_json(exchange: Exchange) -> list[dict[str, Any]]:
    text = b"".join(exchange.response.chunks).decode()
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]


def _answer_tokens(exchange: Exchange) -> tuple[int, int, str | None]:
    """(events that carry a content field, those whose text is not empty, the finish reason) of one streamed answer."""
    choices = [c for event in sse_json(exchange) for c in event["choices"]]
    contents = [c["delta"]["content"] for c in choices if c["delta"].get("content") is not None]
    finishes = [c["finish_reason"] for c in choices if c.get("finish_reason")]
    return len(contents), sum(1 for text in contents if text), finishes[-1] if finishes else None


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
    # min_tokens honoured: every answer is 12 generated tokens, cut by the length limit. llama-cpp-python sends no
    # usage, so bench counts the events that carry text: a token that renders as "" (a special token) is not counted.
    per_answer = [_answer_tokens(e) for e in exchanges]
    assert all(tokens == 12 and finish == "length" for tokens, _, finish in per_answer), per_answer
    assert all(r["completed"] == 6 for r in levels["rows"]), levels["rows"]
    assert sum(r["output_tokens"] for r in levels["rows"]) == sum(texts for _, texts, _ in per_answer), per_answer
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
