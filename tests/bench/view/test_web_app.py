"""`bench view`'s JSON API over the shipped SmolLM2 recording, through aiohttp's test client on a real server."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from bench.cli.view_command import token_for
from bench.core.errors import BenchError
from bench.view.index import Index
from bench.view.web_app import make_app


@pytest.fixture
async def client(smollm2_index: Index) -> Any:
    async with TestClient(TestServer(make_app(smollm2_index))) as c:
        yield c


async def _get(client: TestClient, path: str, status: int = 200, **params: Any) -> Any:
    response = await client.get(path, params={k: str(v) for k, v in params.items()})
    assert response.status == status, await response.text()
    return await response.json()


async def test_runs_carry_pass_rates_with_wilson_intervals(client: TestClient, smollm2_index: Index) -> None:
    body = await _get(client, "/api/runs")
    (run,) = body["runs"]
    (model,) = run["models"]
    passed = sum(r.passed is True for r in smollm2_index.rows)
    scored = sum(r.status == "scored" for r in map(smollm2_index.result, range(len(smollm2_index.rows))))
    assert scored < len(smollm2_index.rows)  # the recording holds transport errors, left out of pass rates
    assert (model["model"], model["passed"], model["n"]) == ("smollm2", passed, scored)
    assert run["results"] == len(smollm2_index.rows)
    assert model["low"] < model["rate"] < model["high"]
    assert run["catalog_hash"] and run["settings"]["seed"] == 7
    assert "agent" in body["facets"]["suite"]


async def test_results_are_paged_filtered_and_sorted_by_the_server(client: TestClient, smollm2_index: Index) -> None:
    first = await _get(client, "/api/results", limit=10)
    assert first["total"] == len(smollm2_index.rows) and len(first["rows"]) == 10
    second = await _get(client, "/api/results", limit=10, offset=10)
    assert [r["n"] for r in second["rows"]] == list(range(10, 20))
    failures = await _get(client, "/api/results", passed="fail", limit=500)
    assert failures["total"] == sum(r.passed is False for r in smollm2_index.rows) > 0
    assert all(r["passed"] is False for r in failures["rows"])
    slow = await _get(client, "/api/results", sort="ttft_us", desc=1, limit=500)
    ttfts = [r["ttft_us"] for r in slow["rows"] if r["ttft_us"] is not None]
    assert ttfts == sorted(ttfts, reverse=True) and len(set(ttfts)) > 1
    assert all(r["ttft_us"] is None for r in slow["rows"][len(ttfts) :])
    agent = await _get(client, "/api/results", suite="agent", q="SLUG", limit=500)
    assert agent["total"] >= 1 and all("slug" in r["test"] and r["suite"] == "agent" for r in agent["rows"])


@pytest.mark.parametrize(
    ("params", "names"),
    [
        ({"sort": "secret"}, "sort="),
        ({"limit": "0"}, "limit="),
        ({"offset": "-1"}, "offset="),
        ({"passed": "x"}, "passed="),
    ],
)
async def test_bad_parameters_get_one_line_naming_them(client: TestClient, params: dict[str, str], names: str) -> None:
    body = await _get(client, "/api/results", 400, **params)
    assert body["error"].startswith(names) and "\n" not in body["error"]


async def test_one_result_has_its_messages_checks_and_the_recorded_events(
    client: TestClient, smollm2_index: Index
) -> None:
    row = next(r for r in smollm2_index.rows if r.suite == "agent" and r.passed is False)
    key = {"run": row.run, "model": row.model, "test": row.test, "epoch": row.epoch}
    body = await _get(client, "/api/result", **key)
    result = smollm2_index.result(row.n)
    assert [c["evaluator"] for c in body["checks"]] == [c.evaluator for c in result.checks]
    assert all(c["reason"] for c in body["checks"] if c["passed"] is False)
    assert [x["id"] for x in body["exchanges"]] == [e.id for e in result.exchanges]
    for shown, scored in zip(body["exchanges"], result.exchanges, strict=True):
        assert shown["timeline"]["token_events"] == scored.n_events
        assert shown["timeline"]["ttft_us"] == scored.ttft_us
        times = [e["t_us"] for e in shown["timeline"]["events"]]
        assert times == sorted(times)
        roles = [t["role"] for t in shown["messages"]]
        assert roles[0] == "system" and "user" in roles and shown["answer"]["role"] == "assistant"
    raw = await client.get("/api/raw", params={**{k: str(v) for k, v in key.items()}, "id": result.exchanges[0].id})
    assert raw.status == 200
    text = await raw.text()
    assert text.startswith("data: {") and text.rstrip().endswith("data: [DONE]")


async def test_unknown_result_and_foreign_exchange_are_404(client: TestClient, smollm2_index: Index) -> None:
    row = smollm2_index.rows[0]
    body = await _get(client, "/api/result", 404, run=row.run, model=row.model, test="no.such", epoch=0)
    assert "no.such" in body["error"]
    key = {"run": row.run, "model": row.model, "test": row.test, "epoch": row.epoch}
    body = await _get(client, "/api/raw", 404, **key, id="x99999")
    assert "x99999" in body["error"]
    body = await _get(client, "/api/result", 400, run=row.run, model=row.model, test=row.test, epoch="one")
    assert body["error"].startswith("epoch=")


async def test_compare_puts_flips_first(client: TestClient, smollm2_index: Index) -> None:
    row = smollm2_index.rows[0]
    body = await _get(client, "/api/compare", a_run=row.run, a_model=row.model, b_run=row.run, b_model=row.model)
    assert body["regressed"] == body["improved"] == 0 and body["pairs"]
    body = await _get(client, "/api/compare", 400, a_run=row.run)
    assert "b_run" in body["error"]


async def test_static_page_and_assets_are_served_and_nothing_else(client: TestClient) -> None:
    page = await client.get("/")
    assert page.status == 200 and "static/app.js" in await page.text()
    assert (await client.get("/static/app.js")).status == 200
    assert (await client.get("/static/..%2Fapp.py")).status == 404


async def test_a_token_guards_every_request(smollm2_index: Index) -> None:
    async with TestClient(TestServer(make_app(smollm2_index, token="s3cret"))) as c:
        denied = await c.get("/api/runs")
        assert denied.status == 401 and "s3cret" not in await denied.text()
        assert (await c.get("/api/runs", params={"token": "wrong"})).status == 401
        opened = await c.get("/", params={"token": "s3cret"})
        assert opened.status == 200
        assert (await c.get("/api/runs")).status == 200  # the cookie set by the first visit
        bearer = await c.get("/api/runs", headers={"Authorization": "Bearer s3cret"}, cookies={})
        assert bearer.status == 200


def test_off_loopback_needs_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    assert token_for("127.0.0.1", None) is None and token_for("::1", None) is None
    with pytest.raises(BenchError, match="--token-env"):
        token_for("0.0.0.0", None)
    monkeypatch.setenv("VIEW_TOKEN", "abc")
    assert token_for("0.0.0.0", "VIEW_TOKEN") == "abc"
    with pytest.raises(BenchError, match="NOPE"):
        token_for("0.0.0.0", "NOPE")


def test_recently_opened_results_are_not_read_again(smollm2_index: Index) -> None:
    row = smollm2_index.rows[-1]
    first = smollm2_index.records(row.n)
    assert smollm2_index.records(row.n) is first
    for other in smollm2_index.rows[:20]:
        smollm2_index.records(other.n)
    again = smollm2_index.records(row.n)
    assert again is not first and again.keys() == first.keys()


async def test_a_result_shows_its_task_time_decode_speed_and_calls_against_the_reference(
    client: TestClient, smollm2_index: Index, smollm2_dir: Any
) -> None:
    from bench.core.cassette import CassetteReader
    from bench.scorer.checked_catalog import load_catalog

    row = next(r for r in smollm2_index.rows if r.suite == "agent" and r.task_s is not None)
    result = smollm2_index.result(row.n)
    key = {"run": row.run, "model": row.model, "test": row.test, "epoch": row.epoch}
    body = await _get(client, "/api/result", **key)
    # The task's wall time, from the cassette's own records: first request sent to last response read.
    records = {x.id: x for x in CassetteReader(smollm2_dir / result.cassette)}
    mine = [records[e.id] for e in result.exchanges]
    span = max(x.started + x.timing.end for x in mine) - min(x.started for x in mine)
    assert body["row"]["task_s"] == pytest.approx(span / 1e6)
    assert body["calls"]["verdict"] in ("same", "more", "fewer", "different") and body["row"]["calls"]
    reference = load_catalog(None).tests[row.test].reference
    assert body["calls"]["reference"] == sum(len(t) for t in reference.turns)
    for shown, scored in zip(body["exchanges"], result.exchanges, strict=True):
        decode = shown["timeline"]["decode_tokens_per_s"]
        if scored.output_tokens and scored.output_tokens > 1 and scored.ttft_us is not None:
            want = (scored.output_tokens - 1) / ((scored.e2el_us - scored.ttft_us) / 1e6)
            assert decode == pytest.approx(want)
    page = await _get(client, "/api/results", sort="task_s", desc="1", limit=5)
    times = [r["task_s"] for r in page["rows"]]
    assert times == sorted(times, reverse=True) and times[0] is not None


async def test_side_by_side_names_two_sides_and_a_test(client: TestClient, smollm2_index: Index) -> None:
    row = next(r for r in smollm2_index.rows if r.passed is False)
    sides = {"a_run": row.run, "a_model": row.model, "b_run": row.run, "b_model": row.model}
    body = await _get(client, "/api/pair", **sides, test=row.test, epoch=row.epoch)
    # A result against itself: no flip, and its answer is the same word for word.
    assert body["flip"] is None and body["diff"] and {p["op"] for p in body["diff"]} == {"same"}
    assert body["a"]["row"] == body["b"]["row"]
    assert "test" in (await _get(client, "/api/pair", 400, **sides))["error"]
    assert "no.such" in (await _get(client, "/api/pair", 404, **sides, test="no.such", epoch=0))["error"]
    assert (await _get(client, "/api/pair", 400, **sides, test=row.test, epoch="x"))["error"].startswith("epoch=")
