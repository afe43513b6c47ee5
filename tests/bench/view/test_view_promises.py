"""Promises of docs/view.md that no other test held: 50 results a page by default, `/api/raw` is the recorded bytes
exactly, a model call shows its request (settings, tools, headers as recorded), the token's cookie is HttpOnly, and
the page fetches nothing from anywhere but its own server."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

import bench.view
from bench.core.cassette import CassetteReader
from bench.view.index import Index
from bench.view.web_app import make_app
from tests.bench.view.conftest import SHIPPED


@pytest.fixture
async def client(smollm2_index: Index) -> Any:
    async with TestClient(TestServer(make_app(smollm2_index))) as c:
        yield c


async def test_the_results_table_is_paged_50_at_a_time_by_default(client: TestClient, smollm2_index: Index) -> None:
    assert len(smollm2_index.rows) > 50
    body = await (await client.get("/api/results")).json()
    assert body["total"] == len(smollm2_index.rows) and [r["n"] for r in body["rows"]] == list(range(50))


async def test_raw_is_the_recorded_bytes_and_the_request_is_shown_with_its_headers(
    client: TestClient, smollm2_index: Index
) -> None:
    recorded = {e.id: e for e in CassetteReader(SHIPPED)}
    row = next(r for r in smollm2_index.rows if r.suite == "agent" and r.passed is not None)
    key = {"run": row.run, "model": row.model, "test": row.test, "epoch": str(row.epoch)}
    result = await client.get("/api/result", params=key)
    assert result.status == 200
    body = await result.json()
    for shown in body["exchanges"]:
        exchange = recorded[shown["id"]]
        raw = await client.get("/api/raw", params={**key, "id": shown["id"]})
        assert raw.status == 200 and await raw.read() == b"".join(exchange.response.chunks)
        sent = await client.get("/api/raw", params={**key, "id": shown["id"], "part": "request"})
        assert sent.status == 200 and await sent.read() == exchange.request.body
        # The request as recorded: its headers (the cassette's, redacted when written), its settings and tools.
        assert shown["request"]["headers"] == exchange.request.headers
        request = json.loads(exchange.request.body)
        settings = json.loads(shown["request"]["settings"])
        assert settings["seed"] == request["seed"] and "messages" not in settings and "tools" not in settings
        assert [t["name"] for t in shown["request"]["tools"]] == [t["function"]["name"] for t in request["tools"]]
        assert shown["request"]["path"] == exchange.request.path


async def test_the_token_cookie_is_http_only(smollm2_index: Index) -> None:
    async with TestClient(TestServer(make_app(smollm2_index, token="s3cret-token"))) as c:
        opened = await c.get("/", params={"token": "s3cret-token"})
        assert opened.status == 200
        cookies = opened.headers.getall("Set-Cookie")
        assert cookies and all("httponly" in cookie.lower() for cookie in cookies)


def test_the_page_fetches_nothing_from_anywhere() -> None:
    """The page is hand-written HTML, CSS and JavaScript shipped in the package: no URL but its own server's."""
    static = Path(bench.view.__file__).parent / "static"
    files = sorted(static.iterdir())
    assert [p.name for p in files] == ["app.css", "app.js", "index.html"]
    for path in files:
        text = path.read_text()
        # The SVG namespace is a name, not a fetch.
        urls = set(re.findall(r"(?:https?:)?//[\w.-]+\.\w+[^\s\"'`)]*", text)) - {"http://www.w3.org/2000/svg"}
        assert not urls, (path.name, urls)
        assert "@import" not in text and "url(" not in text
    page = (static / "index.html").read_text()
    assert re.findall(r'(?:src|href)="([^"#][^"]*)"', page) == ["static/app.css", "static/app.js"]  # besides #/ links
    script = (static / "app.js").read_text()
    assert re.findall(r"fetch\(([^)]*)\)", script) == ["url"] and 'const url = "api/" + path' in script
