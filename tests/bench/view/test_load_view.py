"""`bench view`'s Load page: a `bench load` run's levels from its scores file, through the JSON API, and its charts
shown as SVG images in a real headless Chromium."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from bench.catalog.loadgen.levels import Bounds, parse_span
from bench.catalog.loadgen.load_run import LoadConfig, run_load
from bench.catalog.loadgen.sources import source
from bench.catalog.loadgen.work import SourceOptions
from bench.catalog.sim import start_sim
from bench.cli import main
from bench.view.index import Index, open_index
from bench.view.web_app import make_app
from tests.bench.view.browser import chromium, serve


@pytest.fixture(scope="module")
def load_index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    out = tmp_path_factory.mktemp("load")

    async def record() -> None:
        work = iter(source("synthetic").build(SourceOptions(arg="input=4,output=6", models=("oracle",))))
        cfg = LoadConfig(
            upstream="", models=["oracle"], levels="rate", values=[20.0, 40.0, 80.0], arrival="constant",
            bounds=Bounds(requests=10, warmup=parse_span("20%", "")), out=str(out), slo={"ttft": 500.0},
        )  # fmt: skip
        async with await start_sim(catalog=None, ttft_ms=5) as sim:
            cfg.upstream = sim.url
            await run_load(cfg, work, log=lambda _: None)

    asyncio.run(record())
    scores = out / "scores.jsonl"
    assert main(["rescore", str(out), "--out", str(scores)]) == 0
    return open_index([scores])


async def test_the_api_gives_each_level_and_its_charts_as_svg(load_index: Index) -> None:
    async with TestClient(TestServer(make_app(load_index))) as client:
        body = await (await client.get("/api/load")).json()
        (page,) = body["sources"]
        assert [r["load"] for r in page["rows"]] == ["rate=20", "rate=40", "rate=80"]
        assert all(r["requests"] == 8 and r["warmup"] == 2 and r["failed"] == 0 for r in page["rows"])
        assert page["slo"] == "ttft:500" and page["saturation"] and page["x_label"].startswith("rate")
        assert set(page["charts"]) >= {"throughput", "ttft", "e2el", "late"}
        chart = await client.get("/api/load_chart", params={"source": "0", "chart": "ttft"})
        assert chart.status == 200 and chart.content_type == "image/svg+xml"
        assert (await chart.text()).startswith('<svg xmlns="http://www.w3.org/2000/svg" id="chart-load-ttft"')
        missing = await client.get("/api/load_chart", params={"source": "0", "chart": "nope"})
        assert missing.status == 404 and "no such load chart" in (await missing.json())["error"]
        bad = await client.get("/api/load_chart", params={"source": "x", "chart": "ttft"})
        assert bad.status == 400


@pytest.mark.slow
def test_the_load_page_shows_every_chart_in_a_browser(load_index: Index, tmp_path: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    with chromium(tmp_path / "profile") as browser, serve(load_index) as base:
        browser.get(base + "#/load")
        WebDriverWait(browser, 30).until(lambda d: d.find_elements("css selector", "img.load-chart"))
        images = browser.find_elements("css selector", "img.load-chart")
        loaded: Any = WebDriverWait(browser, 30).until(
            lambda d: d.execute_script(
                "const i = [...document.querySelectorAll('img.load-chart')];"
                "return i.every((e) => e.complete) && i.map((e) => e.naturalWidth);"
            )
        )
        assert len(images) == len(loaded) >= 5 and all(width > 300 for width in loaded)
        table = browser.find_element("css selector", "table.levels").text
        assert "rate=20" in table and "rate=80" in table and "Saturation" in browser.page_source
        assert browser.save_screenshot(str(tmp_path / "load.png"))
