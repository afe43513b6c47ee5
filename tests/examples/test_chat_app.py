"""examples/chat_app end to end: its tests record from the real SmolLM2 server once (`--bench-record-mode=once`), then
pass again in the default `none` mode without being told where that server is, and an outside connection fails the
test. The server is the session's (tests/conftest.py) and still runs during the replay: what shows the replay sent
nothing upstream is the plugin's count of replayed exchanges and `none` mode failing any request it did not record."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.llm, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "chat_app"
TESTS = [
    "test_async_answer",
    "test_same_question_twice",
    "test_stream_story",
    "test_summarize",
    "test_weather_tool_call",
]
PROBE = """
import socket

import pytest


@pytest.mark.bench
def test_reaches_outside():
    socket.create_connection(("192.0.2.1", 443), timeout=5)
"""


def pytest_run(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PYTEST_ADDOPTS"))}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_the_example_records_once_then_replays_offline(smollm2: str, tmp_path: Path) -> None:
    project = tmp_path / "chat_app"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("cassettes", "__pycache__", ".pytest_cache"))
    # The session's SmolLM2 server (tests/conftest.py): recording is the only run that is told its address.
    recorded = pytest_run(project, "--bench-record-mode=once", f"--bench-upstream={smollm2}")
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert "recorded 6 new exchange(s) into 5 cassette(s)" in recorded.stdout
    folder = project / "tests" / "cassettes" / "test_chat_app"
    assert sorted(p.stem for p in folder.glob("*.cassette")) == TESTS
    assert not list(folder.glob(".*"))  # no partial recording left behind
    assert all(p.stat().st_size < 8192 for p in folder.glob("*.cassette"))  # small enough to commit

    # The replay is not told the recording server's address (the project's bench_upstream names 127.0.0.1:8000).
    (project / "tests" / "test_offline.py").write_text(PROBE)
    replayed = pytest_run(project)
    out = replayed.stdout
    assert replayed.returncode == 1, out + replayed.stderr
    assert "5 passed" in out and "1 failed" in out
    assert "replayed 6 exchange(s) in 5 test(s) at pace instant" in out
    assert "test_offline.py::test_reaches_outside tried to connect to 192.0.2.1:443, off this machine" in out
