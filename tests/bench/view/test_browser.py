"""`bench view` in a real headless Chromium: the shipped SmolLM2 recording, failures, one result, a deep link, the
demo's oracle compared with a flawed model, and the HTML report's failed tests opened from their links. Screenshots
of each view go to pytest's tmp dir."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.cli import main
from bench.core.parse import parse_exchange
from bench.view.index import Index
from tests.bench.view.browser import chromium, serve

pytestmark = pytest.mark.slow


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
        turns = browser.find_elements("css selector", ".transcript > .turn")
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
        test = flips[0].find_elements("css selector", "td")[1].text
        flips[0].find_element("css selector", "a[href*='#/pair?']").click()
        _wait(browser, ".cols .side .timeline svg")
        assert len(browser.find_elements("css selector", ".cols .side")) == 2
        # One time scale for both sides: every timeline ends at the same time, the latest of either side.
        ends = {e.text for e in browser.find_elements("css selector", ".side .tl-axis span:last-child")}
        slowest = max(
            e.e2el_us or 0
            for r in demo_index.rows
            if r.test == test and r.epoch == 0 and r.model in ("oracle", "flawed-no-call")
            for e in demo_index.result(r.n).exchanges
        )
        (end,) = ends
        assert float(end.removesuffix(" ms")) >= round(slowest / 1000, 1)
        # The word diff: without its deletions it is b's final answer, without its insertions a's.
        side = "const d = document.querySelector('.diff').cloneNode(true); d.querySelectorAll(arguments[0])"
        side += ".forEach((e) => e.remove()); return d.textContent"
        answers = {}
        for r in demo_index.rows:
            if r.test == test and r.epoch == 0 and r.model in ("oracle", "flawed-no-call"):
                final = demo_index.result(r.n).exchanges[-1]
                answers[r.model] = parse_exchange(demo_index.records(r.n)[final.id])
        assert browser.execute_script(side, "del") == answers["flawed-no-call"].content  # it answered in prose
        a_side = browser.execute_script(side, "ins")
        assert all(c.name in a_side for c in answers["oracle"].tool_calls) and answers["oracle"].content in a_side
        _shot(browser, tmp_path, "compare-side-by-side")
        # Side by side is a deep link: opened fresh, it shows the same pair.
        deep = browser.current_url
        assert "#/pair?" in deep and "test=" in deep
        browser.get(base)
        _wait(browser, "#runs")
        browser.get(deep)
        _wait(browser, ".cols .side .timeline svg")
        assert {e.text for e in browser.find_elements("css selector", ".side .tl-axis span:last-child")} == ends


def test_the_html_reports_failed_tests_open_in_the_view(
    browser: Any, smollm2_dir: Path, smollm2_index: Index, tmp_path: Path
) -> None:
    with serve(smollm2_index) as base:
        out = tmp_path / "report.html"
        assert main(["report", str(smollm2_dir), "--out", str(out), "--view-url", base]) == 0
        page = out.read_text()
        failed = page[page.index("id='failed-tests'") :]
        links = [(html.unescape(h), t) for h, t in re.findall(r"<a href='([^']*)'>([^<]*)</a>", failed)]
        expected = sum(r.passed is False or r.status == "errored" for r in smollm2_index.rows)
        assert len(links) == expected > 0
        (link, test) = links[-1]
        browser.get(link)
        heading = _wait(browser, "h2")
        _wait(browser, ".transcript .exchange")
        assert heading.text.startswith(html.unescape(test) + " · ")
