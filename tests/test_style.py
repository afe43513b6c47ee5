"""The project's own checks run as tests so that `.ci/run` holds every submission to them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import early

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_lint_and_format() -> None:
    lint = run(str(BIN / "ruff"), "check", ".")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = run(str(BIN / "ruff"), "format", "--check", ".")
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


def test_mypy_strict(request: pytest.FixtureRequest) -> None:
    # Started when collection ended (tests/support/early.py), so it ran beside the tests before this one.
    code, output = early.result(request.config, request.node.nodeid)
    assert code == 0, output
