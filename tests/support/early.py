"""Checks that run a long subprocess (mypy --strict), started when collection ends so they run beside the other tests
on the second core; their test waits for the result and asserts on it as if it had run the command itself."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# Node id of the test -> the command whose result it asserts on.
EARLY: dict[str, tuple[str, ...]] = {"tests/test_style.py::test_mypy_strict": (str(BIN / "mypy"),)}
TIMEOUT_S = 600


@dataclass
class Started:
    process: subprocess.Popen[bytes]
    # A file, not a pipe: nobody reads the output until the test runs, and a full pipe would stall the command.
    output: IO[bytes]


STARTED = pytest.StashKey[dict[str, Started]]()


def start(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Start the command of each selected early test. Not in an xdist worker: every worker collects every test, and
    only one of them runs it (the test then runs its command itself)."""
    if hasattr(config, "workerinput"):
        return
    started: dict[str, Started] = {}
    selected = {item.nodeid for item in items}
    for node, cmd in EARLY.items():
        if node in selected:
            out = tempfile.TemporaryFile()  # noqa: SIM115 - closed by result() or stop(), after the command ends
            started[node] = Started(subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT), out)
    config.stash[STARTED] = started


def result(config: pytest.Config, node: str) -> tuple[int, str]:
    """The exit status and output of the test's command: the one started early, or run now."""
    early = config.stash.get(STARTED, {}).pop(node, None)
    if early is None:
        done = subprocess.run(EARLY[node], cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S)
        return done.returncode, done.stdout + done.stderr
    with early.output:
        code = early.process.wait(timeout=TIMEOUT_S)
        early.output.seek(0)
        return code, early.output.read().decode(errors="replace")


def stop(config: pytest.Config) -> None:
    """Commands whose test did not run (a -x stop, an interrupt) do not outlive the session."""
    for early in config.stash.get(STARTED, {}).values():
        early.process.kill()
        early.process.wait()
        early.output.close()
