"""A recording in progress, watched by `bench view --follow` in a real browser: a `bench proxy` process recording
into a folder from a real upstream (tests/support/upstream.py), streamed requests sent through it one after another,
and the time each exchange took to appear on the live page after its last byte reached the client.

Used by tests/bench/view/test_live.py (a generous bound) and benchmarks/view_follow.py (the distribution).
"""

from __future__ import annotations

import json
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Proxy:
    proc: subprocess.Popen[str]
    url: str = ""
    lines: queue.Queue[str] = field(default_factory=queue.Queue)

    def line(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while True:
            try:
                text = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"bench proxy said nothing matching {pattern!r} in {timeout} s") from None
            if m := re.search(pattern, text):
                return m

    def stop(self) -> int:
        """SIGINT (as Ctrl-C): the proxy closes its cassette (recompressed, renamed over) and exits."""
        self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(60)


@contextmanager
def recording_proxy(upstream: str, folder: Path) -> Iterator[Proxy]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench", "proxy", "--port", "0", "--upstream", upstream, "--cassettes", str(folder)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    proxy = Proxy(proc)

    def read() -> None:
        assert proc.stdout is not None
        for text in proc.stdout:
            proxy.lines.put(text)

    threading.Thread(target=read, daemon=True).start()
    try:
        proxy.url = proxy.line(r"listening on (http://\S+)").group(1)
        proxy.line(r"writing ")
        yield proxy
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def send(proxy: str, test: str, **body: Any) -> float:
    """One streamed chat completion through the proxy, tagged with its test id; the wall clock (time.time()) when
    its whole body had been read."""
    doc = {"model": "live-model", "stream": True, "messages": [{"role": "user", "content": test}], **body}
    request = urllib.request.Request(
        f"{proxy}/v1/chat/completions",
        data=json.dumps(doc).encode(),
        headers={"Content-Type": "application/json", "X-Bench-Test": test},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            response.read()
    except urllib.error.HTTPError as exc:  # an error answer is an exchange too
        exc.read()
    return time.time()


def shown_at(driver: Any, tests: list[str], timeout: float) -> dict[str, float]:
    """When (wall clock, seconds) the live page drew each test's row, waiting for all of them (bounded polling:
    only a broken view takes `timeout`)."""
    script = (
        "const out = {}; for (const r of document.querySelectorAll('#flows tr.flow')) "
        "out[r.dataset.test] = Number(r.dataset.shown) / 1000; return out;"
    )
    deadline = time.monotonic() + timeout
    while True:
        shown: dict[str, float] = driver.execute_script(script)
        if all(t in shown for t in tests) or time.monotonic() > deadline:
            return {t: shown[t] for t in tests if t in shown}
        time.sleep(0.05)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]
