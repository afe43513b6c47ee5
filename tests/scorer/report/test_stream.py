"""`bench report` streams the scores file (one pass, a line at a time) and says exactly what the whole file in
memory says: every format's bytes are compared, on the shipped recording's scores and on a synthetic run whose
fingerprints, settings and pass/fail flip."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.cli import main
from bench.scorer.report import aggregate, formats, load
from bench.scorer.report.cost import load_prices
from tests.scorer.report.factory import meta, synthetic, write_scores

SHIPPED = Path(__file__).resolve().parents[3] / "cassettes" / "smollm2-135m-catalog.cassette"
PRICES = "currency: EUR\nmodels:\n  model-a: {input: 0.5, output: 1.5}\n  'model-*': {input: 0.2, output: 0.9}\n"


def rendered(path: Path, *, streamed: bool, prices: Path | None = None) -> dict[str, str]:
    table = load_prices(prices) if prices is not None else None
    if streamed:
        with load.stream(path) as scores:
            report = aggregate.build(scores, table)
    else:
        report = aggregate.build(load.load(path), table)
    return {
        name: formats.FORMATS[name].render(formats.report_document(report), formats.Target())
        for name in formats.names(report=True)
    }


def traffic_lines(results: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """A traffic line per exchange, plus untagged ones; the fingerprint flips back and forth, start times tie."""
    rng = random.Random(seed)
    out = []
    for n, r in enumerate(results):
        for ex in r["exchanges"]:
            out.append(
                {
                    "kind": "traffic",
                    "cassette": f"part-{n % 3}.cassette",
                    "id": ex["id"],
                    "started": 1_700_000_000_000_000 + rng.randrange(0, 5_000) * 1_000,  # ties across cassettes
                    "endpoint": "/v1/chat/completions",
                    "method": "POST",
                    "model": r["model"],
                    "served_model": r["model"] + "-served",
                    "client": rng.choice(["openai-python", "curl"]),
                    "test": r["test"] if rng.random() < 0.9 else None,
                    "status": ex["status"],
                    "outcome": ex["outcome"],
                    "streamed": True,
                    "failed": ex["outcome"] != "complete",
                    "findings": [],
                    "input_tokens": rng.choice([None, rng.randrange(5, 500)]),
                    "input_tokens_source": rng.choice(["usage", "counted", None]),
                    "cached_input_tokens": rng.choice([None, 0, 3]),
                    "output_tokens": ex["output_tokens"],
                    "tokens_source": ex["tokens_source"],
                    "ttft_us": ex["ttft_us"],
                    "tpot_us": ex["tpot_us"],
                    "e2el_us": ex["e2el_us"],
                    "itl_us": ex["itl_us"],
                    "n_events": ex["n_events"],
                    "system_fingerprint": rng.choice(["fp_1", "fp_1", "fp_2", None]),
                    "unknown_events": rng.choice([{}, {"response.audio.delta": 1}]),
                }
            )
    return out


def synthetic_file(tmp_path: Path) -> Path:
    results = synthetic(1_500, seed=7, models=3, epochs=4)
    rng = random.Random(7)
    for r in results:
        r["system_fingerprint"] = rng.choice(["fp_1", "fp_2"])  # flips within a run: warnings
        r["settings"] = {"temperature": rng.choice([0, 0.7]), "stream": True}
        for ex in r["exchanges"]:
            ex["loop_lag_us"] = rng.choice([None, rng.randrange(0, 3_000)])
            ex["tpot_us"] = rng.random() * 9_000 if ex["ttft_us"] else None
            ex["e2el_us"] = rng.randrange(50_000, 4_000_000)
    path = write_scores(tmp_path / "scores.jsonl", meta(), results)
    with open(path, "ab") as fh:
        for line in traffic_lines(results, 7):
            fh.write(orjson.dumps(line, option=orjson.OPT_SORT_KEYS) + b"\n")
    return path


def test_streamed_report_is_the_in_memory_one_on_a_synthetic_run(tmp_path: Path) -> None:
    path = synthetic_file(tmp_path)
    prices = tmp_path / "prices.yaml"
    prices.write_text(PRICES)
    streamed = rendered(path, streamed=True, prices=prices)
    assert streamed == rendered(path, streamed=False, prices=prices)
    body = orjson.loads(streamed["json"])
    # The run is what it was built to be: changes to see, so the comparison above compares something.
    assert len(body["traffic"]["fingerprint_changes"]) > 10 and body["cost"]["total"]["requests"] > 1_000
    assert any("varied within the run" in w for w in body["warnings"])
    assert all(t["loop_lag_ms"]["count"] and t["tpot_ms"]["count"] for t in body["timing"].values())
    # The changes are those of every fingerprinted request sorted by (start, cassette, id), stably: the compact
    # columns and their tie-breaking (start times tie here, within and across cassettes) change nothing.
    entries = [orjson.loads(x) for x in path.read_bytes().splitlines() if b'"kind":"traffic"' in x]
    expected = []
    for model in sorted({str(e["model"]) for e in entries}):
        seen = sorted(
            (e for e in entries if e["system_fingerprint"] and str(e["model"]) == model),
            key=lambda e: (e["started"] or 0, e["cassette"] or "", e["id"]),
        )
        expected += [
            f"{cur['cassette']}#{cur['id']} {prev['system_fingerprint']}>{cur['system_fingerprint']}"
            for prev, cur in itertools.pairwise(seen)
            if prev["system_fingerprint"] != cur["system_fingerprint"]
        ]
    changes = body["traffic"]["fingerprint_changes"]
    assert [f"{c['exchange']} {c['before']}>{c['after']}" for c in changes] == expected


@pytest.fixture(scope="module")
def shipped_scores(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("shipped")
    out = folder / "scores.jsonl"
    assert main(["rescore", str(SHIPPED), "--out", str(out)]) == 0
    return out


def test_streamed_report_is_the_in_memory_one_on_the_shipped_recording(shipped_scores: Path, tmp_path: Path) -> None:
    assert rendered(shipped_scores, streamed=True) == rendered(shipped_scores, streamed=False)
    # What `bench report` prints is the streamed report.
    out = tmp_path / "r.json"
    assert main(["report", str(shipped_scores), "--format", "json", "--out", str(out)]) == 0
    assert out.read_text() == rendered(shipped_scores, streamed=False)["json"]
    assert orjson.loads(out.read_bytes())["traffic"]["exchanges"] > 100


@contextmanager
def held(path: Any, *, jobs: int = 1) -> Iterator[load.Stream]:
    """What `load.stream` replaced: every result and traffic line of the file read into memory first."""
    scores = load.load(path, jobs=jobs)
    yield load.Stream(scores.source, scores.base, scores.meta, iter([*scores.results, *scores.traffic]))


@pytest.mark.parametrize("command", ["report", "compare", "health"])
def test_commands_say_the_same_streamed_or_held(command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = synthetic_file(tmp_path)
    b = tmp_path / "b" / "scores.jsonl"
    b.parent.mkdir()
    b.write_bytes(a.read_bytes())
    lines = b.read_bytes().splitlines(keepends=True)
    rng = random.Random(1)
    # B: a third of the results flip, some twice in a row (duplicates: the last one counts).
    flipped = [line.replace(b'"passed":true', b'"passed":false') if rng.random() < 0.3 else line for line in lines]
    flipped[5:5] = [flipped[5].replace(b'"run":"r-1"', b'"run":"r-2"')]
    b.write_bytes(b"".join(flipped))
    prices = tmp_path / "prices.yaml"
    prices.write_text(PRICES)
    argv = {
        "report": ["report", str(a), "--prices", str(prices)],
        "compare": ["compare", str(a), str(b), "--prices", str(prices)],
        "health": ["health", str(a), str(b)],
    }[command]
    outputs = []
    for stream in (load.stream, held):
        monkeypatch.setattr(load, "stream", stream)
        for fmt in ("json", "markdown"):
            out = tmp_path / f"{command}-{len(outputs)}.{fmt}"
            assert main([*argv, "--format", fmt, "--out", str(out)]) == 0
            outputs.append(out.read_text())
    assert outputs[:2] == outputs[2:]
    if command == "compare":
        body = orjson.loads(outputs[0])
        assert body["regressions"] and any("the last one is used" in w for w in body["warnings"])
        assert body["cost"]["models"] and "bench cassette show" in outputs[1]
