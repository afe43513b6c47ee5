"""The node ids this pytest session collected, kept for tests that check other tests exist
(tests/test_promises_table.py): in a whole-suite run they are already known, so no second pytest is started to
collect them again."""

from __future__ import annotations

import pytest

COLLECTED = pytest.StashKey[frozenset[str]]()


def remember(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every collected test's node id without its parameters, before `-k`/`-m` deselect any."""
    config.stash[COLLECTED] = frozenset(item.nodeid.split("[", 1)[0] for item in items)


def collected(config: pytest.Config) -> frozenset[str]:
    return config.stash.get(COLLECTED, frozenset())
