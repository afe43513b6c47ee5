"""The shipped SmolLM2 recording, rescored once into a tmp copy, and its index for `bench view`'s tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench.view.index import Index, open_index

SHIPPED = Path(__file__).resolve().parents[3] / "cassettes" / "smollm2-135m-catalog.cassette"


@pytest.fixture(scope="session")
def smollm2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("smollm2")
    shutil.copy(SHIPPED, folder / SHIPPED.name)
    from bench.cli import main

    assert main(["rescore", str(folder)]) == 0
    assert (folder / "scores.jsonl").is_file()
    return folder


@pytest.fixture(scope="session")
def smollm2_index(smollm2_dir: Path) -> Index:
    return open_index([smollm2_dir])


@pytest.fixture(scope="session")
def demo_index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    """`bench demo`'s run: an oracle, flawed models, multi-turn agent tasks (5 model calls in agent.fix_all)."""
    from bench.cli import main

    out = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--out", str(out), "--quiet"]) == 0
    (scores,) = out.glob("*.scores.jsonl")
    return open_index([scores])
