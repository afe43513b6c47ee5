from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.cli import main
from bench.core.errors import BenchError
from bench.scorer.report.cost import Price, Prices, cost, cost_delta, load_prices
from bench.scorer.results import TrafficLine
from bench.scorer.scores_io import write_scores
from tests.scorer.report.factory import typed_meta

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "prices.yaml"


def entry(model: str, inp: int | None, out: int, cached: int | None = None, **kw: Any) -> TrafficLine:
    return TrafficLine(
        cassette="c.cassette",
        id=f"x{inp}{out}",
        started=0,
        endpoint="chat.completions",
        model=model,
        served_model=kw.pop("served", model),
        client="curl",
        status=200,
        outcome="complete",
        input_tokens=inp,
        cached_input_tokens=cached,
        output_tokens=out,
        tokens_source=kw.pop("source", "usage"),
        test=kw.pop("test", None),
        e2el_us=1000,
        itl_us=[],
    )


PRICES = Prices("EUR", {"big": Price(10.0, 2.0, 30.0), "small-*": Price(1.0, 1.0, 2.0)})


def test_cost_per_model_test_and_run_with_cached_input_and_patterns() -> None:
    c = cost(
        [
            entry("big", 1_000_000, 100_000, cached=400_000, test="t.a"),  # 600k x 10 + 400k x 2 + 100k x 30 = 9.8
            entry("small-1", 500_000, 0, test="t.a"),  # 0.5
            entry("alias", 0, 1_000_000, served="small-9", source="counted"),  # served name priced: 2.0, estimated
            entry("unknown", None, 10),
        ],
        PRICES,
    )
    by = {r.key: r for r in c.per_model}
    assert by["big"].cost == pytest.approx(9.8) and by["small-1"].cost == pytest.approx(0.5)
    assert by["alias"].cost == pytest.approx(2.0) and by["alias"].estimated == 1
    assert by["unknown"].unpriced == 1 and by["unknown"].missing_input == 1 and c.unpriced_models == ["unknown"]
    assert c.total.cost == pytest.approx(12.3) and c.total.requests == 4
    assert [(r.key, round(r.cost, 6)) for r in c.per_test] == [("t.a", 10.3)]
    delta = {d.model: d for d in cost_delta(c, cost([entry("big", 0, 0)], PRICES))}
    assert delta["big"].delta == pytest.approx(-9.8) and delta["alias"].b == 0
    assert delta["run"].a == pytest.approx(12.3) and delta["run"].b == 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("models: {}\n", "field 'models'"),
        ("models: {m: {input: 1}}\n", "'output' is a required property"),
        ("models: {m: {input: -1, output: 1}}\n", "field 'models.m.input'"),
        ("currency: USD\n", "'models' is a required property"),
        ("models: [\n", "fix the YAML"),
    ],
)
def test_bad_price_tables_are_one_line_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(BenchError, match=message) as info:
        load_prices(path)
    assert "\n" not in str(info.value)


def test_the_shipped_example_loads_and_says_it_is_illustrative() -> None:
    prices = load_prices(EXAMPLE)
    assert "oracle" in prices.models and prices.find("flawed-no-call") is not None
    assert "ILLUSTRATIVE" in EXAMPLE.read_text()


def test_report_and_compare_with_prices(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_scores(a, typed_meta(), [], [entry("oracle", 1000, 500, test="t.x")])
    write_scores(b, typed_meta(), [], [entry("oracle", 1000, 1500, test="t.x")])
    out = tmp_path / "r.json"
    assert main(["report", str(a), "--prices", str(EXAMPLE), "--out", str(out)]) == 0
    body = json.loads(out.read_text())
    assert body["cost"]["total"]["cost"] == pytest.approx((1000 * 1.0 + 500 * 4.0) / 1e6)
    md = tmp_path / "r.md"
    assert main(["report", str(a), "--prices", str(EXAMPLE), "--out", str(md)]) == 0
    assert "Cost per model" in md.read_text() and "Cost per test" in md.read_text()
    cmp = tmp_path / "c.json"
    assert main(["compare", str(a), str(b), "--prices", str(EXAMPLE), "--format", "json", "--out", str(cmp)]) == 0
    rows = {r["model"]: r for r in json.loads(cmp.read_text())["cost"]["models"]}
    assert rows["oracle"]["delta"] == pytest.approx(1000 * 4.0 / 1e6)
