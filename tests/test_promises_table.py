"""docs/promises.md cannot rot: every test it names is collected by pytest
under that name, and every user doc has its group of promises."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.collected import missing

ROOT = Path(__file__).resolve().parents[1]
# Docs whose promises are checked another way: the architecture by tests/test_architecture_doc.py, the scores
# format's tables by tests/scorer/test_scores_format_doc.py, the seeds' features by tests/test_seeds_table.py;
# testing.md is for maintainers, promises.md is the table.
ELSEWHERE = {"architecture.md", "scores-format.md", "seeds.md", "testing.md", "promises.md"}


def table() -> dict[str, list[str]]:
    """Node ids per doc, from docs/promises.md."""
    section = (ROOT / "docs" / "promises.md").read_text()
    groups: dict[str, list[str]] = {}
    for part in section.split("\n### ")[1:]:
        heading, body = part.split("\n", 1)
        doc = heading.split()[0]
        groups[doc] = re.findall(r"\| (tests/[\w/]+\.py::\w+) \|$", body, re.M)
        rows = [line for line in body.splitlines() if line.startswith("| ") and not line.startswith("| section")]
        assert len(groups[doc]) == len(rows), f"{doc}: a row without exactly one test node id"
    return groups


def test_every_user_doc_has_its_promises_listed() -> None:
    docs = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md") if p.name not in ELSEWHERE} | {"README.md"}
    groups = table()
    assert set(groups) == docs
    assert all(groups[doc] for doc in docs)


def test_every_listed_test_exists(pytestconfig: pytest.Config) -> None:
    ids = sorted({node for nodes in table().values() for node in nodes})
    assert len(ids) > 200
    assert not missing(pytestconfig, ids)
