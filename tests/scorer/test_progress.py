"""Long scoring work shows its progress: a line now and then when stderr is piped, a rich bar on a terminal; nothing
when no command asked (a library caller)."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cli import main
from bench.scorer import progress
from tests.support.rescored import rescored

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "cassettes" / "smollm2-135m-catalog.cassette"
EXCHANGES = 212  # in the shipped cassette


@pytest.mark.parametrize("jobs", ["1", "2"])  # in this process; in a pool of two, the cassette split in shards
def test_piped_rescore_prints_a_line_now_and_then(
    jobs: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress, "INTERVAL_S", 0.0)  # a line at every step, instead of every 10 s
    assert main(["rescore", str(SHIPPED), "--jobs", jobs, "--out", str(tmp_path / "s.jsonl")]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("bench rescore: ")]
    assert lines, "no progress line"
    counts = [
        int(m.group(1).replace(",", "")) for m in (re.search(r"([\d,]+) exchange\(s\) read", x) for x in lines) if m
    ]
    assert counts == sorted(counts) and counts[-1] == EXCHANGES
    assert lines[-1].startswith(f"bench rescore: 1/1 cassette(s), {EXCHANGES} exchange(s) read, ")


def test_report_on_a_folder_of_cassettes_shows_its_rescore(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress, "INTERVAL_S", 0.0)
    assert main(["report", str(SHIPPED.parent), "--format", "json"]) == 0
    assert f"bench report: 1/1 cassette(s), {EXCHANGES} exchange(s) read" in capsys.readouterr().err


def test_no_progress_without_a_command_asking(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress, "INTERVAL_S", 0.0)
    rescored([SHIPPED])
    assert not capsys.readouterr().err


def test_a_terminal_gets_a_bar(tmp_path: Path) -> None:
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench", "rescore", str(SHIPPED), "--jobs", "1", "--out", str(tmp_path / "s.jsonl")],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=follower,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "120", "TERM": "xterm"},
    )
    os.close(follower)
    seen = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 120)
        if not ready:
            break
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    assert proc.wait(60) == 0
    text = seen.decode(errors="replace")
    assert "bench rescore" in text and "exchange(s) read" in text
