"""`bench init`: a starter bench.yaml that loads as it is, and with --with-tasks a copy of the catalog and its
fixture repositories that `bench record --config` then runs, edits included; nothing is ever overwritten."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import pytest

from bench.catalog.driver.config import build_config, load_config_file
from bench.catalog.sim import start_sim
from bench.cli import main
from bench.cli.init_command import run_init
from bench.core.cassette import CassetteReader, find_cassettes
from bench.core.errors import BenchError
from bench.scorer.checked_catalog import load_catalog

ROOT = Path(__file__).resolve().parents[3]


def test_init_writes_a_starter_config_that_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", "--dir", str(tmp_path)]) == 0
    assert "next:" in capsys.readouterr().out and sorted(p.name for p in tmp_path.iterdir()) == ["bench.yaml"]
    cfg = build_config(load_config_file(tmp_path / "bench.yaml"), {}, env={})
    assert (cfg.upstream, cfg.models, cfg.seed_mode, cfg.catalog) == (
        "http://127.0.0.1:8000",
        ["my-model"],
        "per-epoch",
        None,
    )
    # A second init never overwrites what is there, its own file included.
    (tmp_path / "bench.yaml").write_text("models: [mine]\n")
    with pytest.raises(BenchError, match="already exists: bench init never overwrites"):
        run_init(argparse.Namespace(dir=tmp_path, with_tasks=False))
    assert (tmp_path / "bench.yaml").read_text() == "models: [mine]\n"


def test_with_tasks_copies_the_catalog_and_record_runs_the_edited_copy(tmp_path: Path) -> None:
    assert main(["init", "--dir", str(tmp_path), "--with-tasks"]) == 0
    suites, fixtures = tmp_path / "tasks" / "suites", tmp_path / "tasks" / "fixtures"
    assert (fixtures / "ledger" / "check.py").is_file() and (suites / "agent.yaml").is_file()
    cfg = build_config(load_config_file(tmp_path / "bench.yaml"), {}, env={})
    assert cfg.catalog == str(suites)
    # Unedited, the copy is the built-in catalog: the same hashes, so its runs compare with the built-in's.
    assert load_catalog(suites).hash == load_catalog(None).hash
    # An edited task: its prompt changes, and so does its hash; the copied fixture is the one the task uses.
    agent = suites / "agent.yaml"
    agent.write_text(agent.read_text().replace("Which currency does the ledger package use", "Which currency is used"))
    edited = load_catalog(suites).tests["agent.ledger_currency"]
    assert edited.hash != load_catalog(None).tests["agent.ledger_currency"].hash
    assert edited.workspace is not None and Path(edited.workspace.fixture) == (fixtures / "ledger").resolve()

    async def go() -> None:
        async with await start_sim(catalog=load_catalog(suites)) as sim:
            flags = ("--upstream", sim.url, "--model", "oracle", "--tests", "agent.ledger_currency", "--quiet")
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bench", "record", "--config", str(tmp_path / "bench.yaml"), *flags,
                "--out", str(tmp_path / "out"), cwd=ROOT,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            _, err = await asyncio.wait_for(proc.communicate(), 120)
            assert proc.returncode == 0, err.decode()

    asyncio.run(go())
    [cassette] = find_cassettes([tmp_path / "out"])
    reader = CassetteReader(cassette)
    assert reader.header.run.tests == {"agent.ledger_currency": edited.hash}
    assert any(b"Which currency is used" in x.request.body for x in reader)
