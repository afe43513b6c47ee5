"""A real headless Chromium driven by Selenium through Debian's chromedriver, and a `bench view` server in a thread."""

from __future__ import annotations

import asyncio
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from bench.view.index import Index
from bench.view.live import Live
from bench.view.web_app import make_app
from tests.support.chromium import HEADLESS

CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM_FLAGS = (*HEADLESS, "--window-size=1400,1000")


@contextmanager
def serve(index: Index, live: Live | None = None) -> Iterator[str]:
    """Serve the index (and a followed folder) on a free loopback port in a thread of its own; yields the base URL."""
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(make_app(index, live=live), shutdown_timeout=1)
    ready = threading.Event()
    port: list[int] = []

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        port.append(runner.addresses[0][1])
        ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(30)
    try:
        yield f"http://127.0.0.1:{port[0]}/"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)


@contextmanager
def chromium(profile: Path) -> Iterator[Any]:
    webdriver = pytest.importorskip("selenium.webdriver")
    if not CHROMEDRIVER.exists() or shutil.which("chromium") is None:
        pytest.skip("needs Debian's chromium and chromium-driver (scripts/test installs them)")
    options = webdriver.ChromeOptions()
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.binary_location = shutil.which("chromium") or ""
    # The driver's path is given, so Selenium never tries to download one.
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=str(CHROMEDRIVER)))
    try:
        yield driver
    finally:
        driver.quit()
