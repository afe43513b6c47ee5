"""`bench view` in a real headless Chromium: the shipped SmolLM2 recording, failures, one result, a deep link, and
the demo's oracle compared with a flawed model. Screenshots of each view go to pytest's tmp dir."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.view.index import Index, open_index
from tests.bench.view.browser import chromium, serve

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    from bench.cli import main

    out = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--out", str(out), "--quiet"]) == 0
    (scores,) = out.glob("*.scores.jsonl")
    return open_index([scores])


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    # One Chromium for the module (its start is the slow part): each test serves its own index on a port of its own,
    # so the two never share an origin (storage, history) and each opens its first page itself.
    with chromium(tmp_path_factory.mktemp("chromium") / "profile") as driver:
        yield driver


def _wait(driver: Any, css: str, timeout: float = 30) -> Any:
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(ec.presence_of_element_located(("css selector", css)))


def _shot(driver: Any, tmp_path: Path, name: str) -> None:
    height = driver.execute_script("return document.body.scrollHeight")
    driver.set_window_size(1400, min(max(height, 800), 4000))
    path = tmp_path / f"{name}.png"
    assert driver.save_screenshot(str(path)) and path.stat().st_size > 0


def test_failures_one_result_and_a_deep_link(browser: Any, smollm2_index: Index, tmp_path: Path) -> None:
    from selenium.webdriver.support.ui import Select

    with serve(smollm2_index) as base:
        browser.get(base)
        runs = _wait(browser, "#runs")
        assert "smollm2" in runs.text and "%" in runs.text
        _shot(browser, tmp_path, "runs")
        browser.get(base + "#/results")
        _wait(browser, "#results tr.result")
        Select(browser.find_element("css selector", "select[name=passed]")).select_by_value("fail")
        _wait(browser, "select[name=passed] option[value=fail]:checked")
        failures = sum(r.passed is False for r in smollm2_index.rows)
        _wait(browser, "#count")
        assert browser.find_element("css selector", "#count").text.endswith(f"of {failures}")
        rows = browser.find_elements("css selector", "#results tr.result")
        assert rows and all("fail" in r.text for r in rows)
        _shot(browser, tmp_path, "failures")
        rows[0].find_element("css selector", "a").click()
        _wait(browser, ".exchange .timeline svg")
        row = next(r for r in smollm2_index.rows if r.passed is False)
        result = smollm2_index.result(row.n)
        timelines = browser.find_elements("css selector", ".exchange .timeline")
        assert len(timelines) == len(result.exchanges)
        for timeline, scored in zip(timelines, result.exchanges, strict=True):
            drawn = timeline.find_elements("css selector", "line.ev.token")
            assert len(drawn) == scored.n_events > 0
            assert timeline.find_elements("css selector", "line.ttft")
        turns = browser.find_elements("css selector", ".conversation .turn")
        assert [t.get_attribute("class").split()[-1] for t in turns[:2]] == ["system", "user"]
        assert "Checks" in browser.page_source and result.checks[0].evaluator in browser.page_source
        _shot(browser, tmp_path, "result")
        deep = browser.current_url
        assert "#/result?" in deep and "test=" in deep
        # A deep link opened fresh (another browser tab's view) shows the same result.
        browser.get(base)
        _wait(browser, "#runs")
        browser.get(deep)
        heading = _wait(browser, "h2")
        _wait(browser, ".exchange .timeline svg")
        assert row.test in heading.text
        raw = browser.find_element("css selector", "a.raw").get_attribute("href")
        browser.get(raw)
        assert browser.find_element("tag name", "body").text.startswith("data: {")


def test_compare_oracle_with_a_flawed_model_shows_flips(browser: Any, demo_index: Index, tmp_path: Path) -> None:
    (run,) = demo_index.runs
    expected = sum(
        1
        for a in demo_index.rows
        if a.model == "oracle" and a.passed
        for b in demo_index.rows
        if b.model == "flawed-no-call" and b.test == a.test and b.epoch == a.epoch and b.passed is False
    )
    assert expected > 0
    with serve(demo_index) as base:
        url = f"{base}#/compare?a_run={run.id}&a_model=oracle&b_run={run.id}&b_model=flawed-no-call"
        browser.get(url)
        summary = _wait(browser, "#flips")
        assert summary.text.startswith(f"{expected} regressed, 0 improved")
        pairs = browser.find_elements("css selector", "#compare tr.pair")
        flips = [p for p in pairs if "flip-regressed" in (p.get_attribute("class") or "")]
        assert len(flips) == expected
        assert pairs[: len(flips)] == flips  # flips first
        _shot(browser, tmp_path, "compare")
        flips[0].find_element("css selector", "button").click()
        _wait(browser, "#pair .side .timeline svg")
        assert len(browser.find_elements("css selector", "#pair .side")) == 2
        _shot(browser, tmp_path, "compare-side-by-side")
