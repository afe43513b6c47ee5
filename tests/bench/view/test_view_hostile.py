"""`bench view` against hostile callers: a page of another origin reaching it by DNS rebinding (any Host header but
the loopback names is refused), parameters crafted to make Python talk (every error in bench's words), and compare
for runs without an id (traffic scored by rules)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from bench.cli import main
from bench.cli.view_command import answered_hosts
from bench.core.cassette import CassetteWriter
from bench.core.cassette.redact import Redactor
from bench.scorer.synth import exchange_record, sse_chunks
from bench.view.index import Index, open_index
from bench.view.web_app import host_name, make_app


@pytest.fixture
async def loopback(smollm2_index: Index) -> Any:
    async with TestClient(TestServer(make_app(smollm2_index, hosts=answered_hosts("127.0.0.1")))) as c:
        yield c


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8765", "127.0.0.1.evil.example", "10.0.0.7", ""])
async def test_a_host_that_is_not_loopback_gets_421(loopback: TestClient, host: str) -> None:
    for path in ("/", "/api/runs", "/api/results"):
        resp = await loopback.get(path, headers={"Host": host})
        body = await resp.json()
        assert resp.status == 421 and "loopback" in body["error"]


@pytest.mark.parametrize("host", ["127.0.0.1:8765", "localhost:8765", "LOCALHOST", "[::1]:8765"])
async def test_loopback_names_are_answered(loopback: TestClient, host: str) -> None:
    resp = await loopback.get("/api/runs", headers={"Host": host})
    assert resp.status == 200


def test_the_hosts_answered_follow_the_bound_address() -> None:
    assert answered_hosts("127.0.0.2") is not None and "127.0.0.2" in answered_hosts("127.0.0.2")  # type: ignore[operator]
    assert answered_hosts("0.0.0.0") is None  # bound beyond loopback: a token guards it (test_web_app)
    assert [host_name(h) for h in ("a:1", "[::1]:2", "::1", "B")] == ["a", "::1", "::1", "b"]


@pytest.mark.parametrize(
    "params",
    [
        {"offset": "9" * 5000},  # int() of 5000 digits: Python's "Exceeds the limit (4300 digits)" was the body
        {"limit": "1" * 20},
        {"run": "r", "model": "m", "test": "t", "epoch": "9" * 5000},
    ],
)
async def test_errors_are_in_benchs_own_words(loopback: TestClient, params: dict[str, str]) -> None:
    path = "/api/result" if "epoch" in params else "/api/results"
    resp = await loopback.get(path, params=params, headers={"Host": "127.0.0.1"})
    body = await resp.json()
    assert resp.status == 400 and "whole number" in body["error"]
    assert "Exceeds" not in body["error"] and "int" not in body["error"] and len(body["error"]) < 200


async def test_compare_works_for_runs_without_an_id(tmp_path: Path) -> None:
    with CassetteWriter(tmp_path / "agent.cassette") as writer:
        for i, (model, text) in enumerate([("m1", "Paris"), ("m2", "Lyon")]):
            request = {"model": model, "stream": True, "messages": [{"role": "user", "content": "capital?"}]}
            writer.put(exchange_record(sse_chunks(text, model=model), id=f"x{i}", request=request))
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "rules:\n  - id: capital\n    match: {model: '*'}\n    checks:\n"
        "      - evaluator: exact_token\n        args: {value: Paris}\n"
    )
    assert main(["rescore", str(tmp_path / "agent.cassette"), "--rules", str(rules), "--jobs", "1"]) == 0
    index = open_index([tmp_path])
    runs = {r.run for r in index.rows if r.test == "capital"}
    assert runs == {""}  # rules traffic carries no run id
    async with TestClient(TestServer(make_app(index))) as client:
        params = {"a_run": "", "a_model": "m1", "b_run": "", "b_model": "m2"}
        resp = await client.get("/api/compare", params=params)
        body = await resp.json()
    assert resp.status == 200, body
    assert (body["regressed"], len(body["pairs"])) == (1, 1)


async def test_a_cassette_written_without_redaction_shows_no_secret(tmp_path: Path) -> None:
    """A cassette from another writer (or one written before a rule existed) holds secrets in headers, the query and
    the body: the request is shown with each of them redacted, by the rules the writer applies."""
    secrets = ["sk-live-header-0123456789", "sk-live-apikey-0123456789", "sk-live-query-0123456789", "body-pass-0123"]
    request = {"model": "m", "stream": True, "api_key": secrets[3], "messages": [{"role": "user", "content": "hi"}]}
    record = exchange_record(sse_chunks("Hello"), id="x0", request=request)
    record.request.headers += [["Authorization", f"Bearer {secrets[0]}"], ["X-Api-Key", secrets[1]]]
    record.request.query = f"key={secrets[2]}&verbose=1"
    no_rules = Redactor(headers=frozenset(), string_fields=frozenset(), query_params=frozenset())
    with CassetteWriter(tmp_path / "foreign.cassette", redactor=no_rules) as writer:
        writer.put(record)
    assert main(["rescore", str(tmp_path)]) == 0
    index = open_index([tmp_path])
    (row,) = index.rows
    async with TestClient(TestServer(make_app(index))) as client:
        params = {"run": row.run, "model": row.model, "test": row.test, "epoch": "0"}
        response = await client.get("/api/result", params=params)
        text = await response.text()
    assert response.status == 200, text
    shown = json.loads(text)["exchanges"][0]["request"]
    assert ["Authorization", "[REDACTED]"] in shown["headers"] and ["X-Api-Key", "[REDACTED]"] in shown["headers"]
    assert shown["path"] == "/v1/chat/completions?key=[REDACTED]&verbose=1"
    assert json.loads(shown["settings"])["api_key"] == "[REDACTED]"
    assert not [s for s in secrets if s in text]
