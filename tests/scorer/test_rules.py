"""Untagged traffic scored: a rules file applied to real SDK traffic through `bench proxy`, and untagged repeats of
catalog requests recognised as their tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI

from bench.catalog.sim import start_sim
from bench.cli import main
from bench.core.errors import BenchError
from bench.core.responses_request import responses_from_chat
from bench.proxy.server import start_proxy
from bench.scorer.checked_catalog import load_catalog
from bench.scorer.report import aggregate
from bench.scorer.report.compare import compare
from bench.scorer.report.load import load
from bench.scorer.results import Result
from bench.scorer.rules import load_rules
from tests.support.rescored import rescored as rescore

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "rules.yaml"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


async def _traffic(out: Path, model: str) -> None:
    catalog = load_catalog(None)
    async with (
        await start_sim(catalog=catalog) as sim,
        await start_proxy(upstream=sim.url, cassettes=out) as proxy,
    ):
        client = AsyncOpenAI(base_url=proxy.url + "/v1", api_key="sk-any", max_retries=0)
        # Ad hoc traffic the rules select: chat and Responses API, each offering get_weather.
        for text in ("What is the weather in Oslo?", "Weather in Lima, please."):
            await client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": text}], tools=[WEATHER]
            )
            await client.responses.create(
                model=model, input=text, tools=responses_from_chat({"tools": [WEATHER]})["tools"], stream=True
            )
        # Two catalog tests sent exactly as `bench record` would, without any X-Bench-* tag (one on each API).
        for api, test_id in (("chat", "tools.calculator_product"), ("responses", "json.event_record")):
            test = catalog.tests[test_id]
            chat: dict[str, Any] = {"model": model, "messages": list(test.messages), **dict(test.params)}
            if test.tools:
                chat["tools"] = list(test.tools)
            if api == "chat":
                await client.chat.completions.create(**chat)
            else:
                await client.responses.create(**responses_from_chat(chat))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import asyncio

    out = {}
    for model in ("oracle", "flawed-no-call"):
        folder = tmp_path_factory.mktemp(model)
        asyncio.run(_traffic(folder, "oracle" if model == "oracle" else model))
        out[model] = folder
    return out


def test_rules_score_untagged_traffic_like_catalog_results(runs: dict[str, Path]) -> None:
    rules = load_rules(EXAMPLE)
    _, results = rescore([runs["oracle"]], rules=rules, jobs=1)
    by_test: dict[str, list[Result]] = {}
    for r in results:
        by_test.setdefault(r.test, []).append(r)
    weather = by_test["weather.calls_get_weather"]
    assert [(r.epoch, r.status, r.passed, r.suite) for r in weather] == [
        (0, "scored", True, "rules"),
        (1, "scored", True, "rules"),
        (2, "scored", True, "rules"),
        (3, "scored", True, "rules"),
    ]
    assert {r.endpoint for r in weather} == {"chat.completions", "responses"}
    assert len(by_test["any.answers_in_time"]) == 6 and all(r.passed for r in by_test["any.answers_in_time"])
    # Repeats of catalog requests, untagged, are their tests (and the oracle passes them), on either API.
    for test_id in ("tools.calculator_product", "json.event_record"):
        (r,) = by_test[test_id]
        assert r.status == "scored" and r.passed is True, (test_id, r.checks)


def test_rescore_cli_with_rules_then_report_and_compare(runs: dict[str, Path], tmp_path: Path) -> None:
    for folder in runs.values():
        assert main(["rescore", str(folder), "--rules", str(EXAMPLE), "--jobs", "2"]) == 0
    flawed = load(runs["flawed-no-call"] / "scores.jsonl")
    (calc,) = [r for r in flawed.results if r.test == "tools.calculator_product"]
    assert calc.passed is False and calc.failure_type == "no_call"
    report = aggregate.build(flawed)
    rules_rate = [r for r in report.rates if r.scope == "suite" and r.group == "rules"]
    assert rules_rate and rules_rate[0].counts.scored == 10 and 0 <= rules_rate[0].low <= rules_rate[0].high <= 1
    # The same traffic rescored: rule results pair up by (model, rule, epoch), so compare sees no change.
    oracle = load(runs["oracle"] / "scores.jsonl")
    again = load(runs["oracle"] / "scores.jsonl")
    comparison = compare(oracle, again)
    assert comparison.paired == len(oracle.results)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rules: []\n", "field 'rules'"),
        ("rules:\n  - id: a\n    checks: [{evaluator: nope}]\n", "unknown evaluator 'nope'"),
        ("rules:\n  - id: a\n    checks: [{evaluator: regex, args: {}}]\n", "field 'rules.0.checks.0.args'"),
        ("rules:\n  - id: a\n    match: {request: '('}\n    checks: [{evaluator: valid_json}]\n", "bad regular"),
        ("rules:\n  - id: a\n    checks: [{evaluator: file_exists, args: {path: x}}]\n", "needs a workspace"),
        (
            "rules:\n  - {id: a, checks: [{evaluator: valid_json}]}\n  - {id: a, checks: [{evaluator: valid_json}]}\n",
            "used twice",
        ),
        ("rules: [\n", "fix the YAML"),
    ],
)
def test_bad_rules_files_are_one_line_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(text)
    with pytest.raises(BenchError, match=message) as info:
        load_rules(path)
    assert "\n" not in str(info.value)
