"""Every page kind of `bench view` in headless Chromium at 1280 and 800 px wide, over a run whose recorded content is
hostile everywhere (models, prompts, answers, tool calls, headers, errors): each page is drawn, nothing recorded is
ever run or made an element, and a screenshot of each is kept (pytest's tmp dir, or $BENCH_VIEW_SHOTS)."""

from __future__ import annotations

import os
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.cli import main
from bench.core.cassette import CassetteWriter
from bench.scorer.synth import exchange_record, sse_chunks
from bench.view.index import Index, open_index
from bench.view.live import Live
from tests.bench.view.browser import chromium, serve

pytestmark = pytest.mark.slow

# Run by a page that put recorded text in as HTML; each sets a mark the test looks for.
HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script><i class="pwn">made it</i>"\'&amp;'
MODELS = (f"m1{HOSTILE}", f"m2{HOSTILE}")
WIDTHS = (1280, 800)


def _cassette(path: Path) -> None:
    with CassetteWriter(path) as writer:
        for i, model in enumerate(MODELS * 2):
            request = {
                "model": model,
                "stream": True,
                "temperature": HOSTILE,
                "tools": [{"type": "function", "function": {"name": HOSTILE, "description": HOSTILE}}],
                "messages": [{"role": "system", "content": HOSTILE}, {"role": "user", "content": f"capital {HOSTILE}"}],
            }
            answer = "Paris " + HOSTILE if i % 2 == 0 else "Lyon " + HOSTILE
            record = exchange_record(sse_chunks(answer, [(HOSTILE, {"q": HOSTILE})], model=model), id=f"x{i}",
                                     request=request)  # fmt: skip
            record.request.headers.append(["X-Note", HOSTILE])
            writer.put(record)
        for i, body in ((9, orjson.dumps({"error": {"message": HOSTILE}})), (10, HOSTILE.encode())):
            failed = exchange_record([body], id=f"x{i}", status=500, streamed=False, request={"model": MODELS[0]})
            writer.put(failed)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Index]:
    folder = tmp_path_factory.mktemp("hostile")
    _cassette(folder / "hostile.cassette")
    rules = folder / "rules.yaml"
    rules.write_text(
        "rules:\n  - id: capital.paris\n    match: {model: '*', request: capital}\n    checks:\n"
        "      - evaluator: contains_all\n        args: {values: [Paris]}\n"
    )
    assert main(["rescore", str(folder), "--rules", str(rules)]) == 0
    return folder, open_index([folder])


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with chromium(tmp_path_factory.mktemp("chromium") / "profile") as driver:
        yield driver


def _drawn(driver: Any, url: str, ready: str) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get("about:blank")
    driver.get(url)
    WebDriverWait(driver, 60, poll_frequency=0.05).until(lambda d: d.find_elements("css selector", ready))
    time.sleep(0.1)  # the frame after the view


def _safe(driver: Any) -> None:
    """Nothing recorded ran, and nothing recorded became an element."""
    assert driver.execute_script("return window.__pwned === undefined")
    assert driver.execute_script("return document.scripts.length") == 1  # app.js
    assert not driver.find_elements("css selector", "main img, main script, main .pwn, main [onerror]")


def _shot(driver: Any, folder: Path, name: str, width: int) -> Path:
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(width, min(max(height, 700), 5000) + 140)
    path = folder / f"{name}-{width}.png"
    assert driver.save_screenshot(str(path)) and path.stat().st_size > 10_000
    return path


def test_every_page_kind_at_two_widths_runs_nothing_recorded(
    browser: Any, hostile: tuple[Path, Index], tmp_path: Path
) -> None:
    folder, index = hostile
    shots = Path(os.environ.get("BENCH_VIEW_SHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    rule = [r for r in index.rows if r.test == "capital.paris"]
    untagged = next(r for r in index.rows if r.run == "untagged" and r.test.endswith("#x9"))
    unreadable = next(r for r in index.rows if r.run == "untagged" and r.test.endswith("#x10"))
    assert rule and {r.model for r in rule} == set(MODELS)

    def key(r: Any) -> str:
        return urllib.parse.urlencode({"run": r.run, "model": r.model, "test": r.test, "epoch": r.epoch})

    sides = {"a_run": "", "a_model": MODELS[0], "b_run": "", "b_model": MODELS[1]}
    pages = {
        "runs": ("#/runs", "#runs"),
        "results": ("#/results", "#results tr.result"),
        "search": ("#/results?" + urllib.parse.urlencode({"q": "lyon <img"}), "tr.snippet"),
        "result": ("#/result?" + key(rule[0]), ".exchange .timeline svg"),
        "errored-untagged": ("#/result?" + key(untagged), ".exchange .error"),
        "error-not-json": ("#/result?" + key(unreadable), ".exchange .error"),
        "compare": ("#/compare?" + urllib.parse.urlencode(sides), "#compare tr.pair"),
        "pair": ("#/pair?" + urllib.parse.urlencode({**sides, "test": "capital.paris", "epoch": 0}), ".diff ins"),
        "live": ("#/live", "#flows tr.flow"),
        "flow": ("#/flow?" + urllib.parse.urlencode({"cassette": "hostile.cassette", "id": "x1"}), ".exchange"),
    }
    with serve(index, Live(folder)) as base:
        for name, (fragment, ready) in pages.items():
            for width in WIDTHS:
                browser.set_window_size(width, 900)
                _drawn(browser, base + fragment, ready)
                _safe(browser)
                assert not browser.find_elements("css selector", "p.error"), name
                # Recorded text is shown as text: the markup is there to read.
                assert "<script>window.__pwned=2</script>" in browser.find_element("tag name", "main").text or name in (
                    "runs",
                    "compare",
                )
                _shot(browser, shots, name, width)
                # Nothing is wider than the window but the tables that scroll in their own box.
                overflow = browser.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
                assert overflow <= 0, (name, width, overflow)
            if name == "result":
                browser.find_element("css selector", "details.request summary").click()  # built when opened
                _safe(browser)
                assert HOSTILE in browser.find_element("css selector", "details.request").text
