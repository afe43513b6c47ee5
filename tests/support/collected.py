"""The node ids this pytest session collected, kept for tests that check other tests exist
(tests/test_promises_table.py): in a whole-suite run they are already known, so no second pytest is started to
collect them again."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

COLLECTED = pytest.StashKey[frozenset[str]]()


def remember(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every collected test's node id without its parameters, before `-k`/`-m` deselect any."""
    config.stash[COLLECTED] = frozenset(item.nodeid.split("[", 1)[0] for item in items)


def collected(config: pytest.Config) -> frozenset[str]:
    return config.stash.get(COLLECTED, frozenset())


def missing(config: pytest.Config, node_ids: Iterable[str]) -> list[str]:
    """The node ids (without parameters) pytest does not collect. A whole-suite run has collected them already; the
    others (a file run alone, or a node id that does not exist) are collected by a pytest of their own."""
    ids = sorted(set(node_ids))
    found = set(collected(config))
    rest = [node for node in ids if node not in found]
    if rest:
        args = ["--collect-only", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", *rest]
        run = subprocess.run(
            [sys.executable, "-m", "pytest", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
        )
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        found |= {line.split("[", 1)[0] for line in run.stdout.splitlines() if "::" in line}
    return [node for node in ids if node not in found]
