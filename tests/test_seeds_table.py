"""docs/seeds.md lists every feature of the two tools bench grew from, with where bench has it and the test that
checks it: one test per row, and every test named is one pytest collects."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.collected import missing

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "seeds.md"
SEEDS = ("llm-testbench", "ToolCallBench")


def rows() -> list[tuple[str, str, str, str]]:
    section = DOC.read_text().split("\n## Every feature, where bench has it\n", 1)[1].split("\n## ", 1)[0]
    out = []
    for line in section.splitlines():
        if not line.startswith("| ") or line.startswith(("| seed ", "|---")):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        assert len(cells) == 4, f"a row of four cells: {line}"
        out.append((cells[0], cells[1], cells[2], cells[3]))
    return out


def test_every_row_has_a_seed_a_place_in_bench_and_exactly_one_test() -> None:
    table = rows()
    assert {seed for seed, *_ in table} == set(SEEDS)
    # The features the issue that asked for this table names, each of them a row.
    features = " ".join(feature for _, feature, _, _ in table)
    for wanted in ("--seed", "--category", "Go program", "decode", "seconds per task", "reference", "init", "sessions"):
        assert wanted in features, wanted
    assert len({feature for _, feature, _, _ in table}) == len(table), "each feature once"
    for _seed, feature, where, test in table:
        assert where, feature
        assert re.fullmatch(r"tests/[\w/]+\.py::\w+", test), f"{feature}: one test node id, not {test!r}"


def test_every_test_the_table_names_exists(pytestconfig: pytest.Config) -> None:
    assert not missing(pytestconfig, (test for *_, test in rows()))
