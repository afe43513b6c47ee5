"""Promises of docs/scorer.md that no other test held: where the scores file goes, `bench rescore` never importing
aiohttp, `scorer_version`'s parts, and what a sandboxed program sees (its environment, directory and limits)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cli import build_parser, main
from bench.core.parse import PARSER_VERSION
from bench.scorer.rescore import SCORING_VERSION, scorer_version
from bench.scorer.scores_io import read_scores
from bench.workspace import sandbox
from tests.scorer.helpers import record, write_cassette


def test_the_scores_file_goes_beside_the_first_file_or_in_the_first_folder_or_to_out(tmp_path: Path) -> None:
    first, second = tmp_path / "one" / "a.cassette", tmp_path / "two" / "b.cassette"
    write_cassette(first, [record("math.ages", "Answer: 13")])
    write_cassette(second, [record("math.ages", "Answer: 14")])
    assert main(["rescore", str(first), str(second), "--jobs", "1"]) == 0
    assert (tmp_path / "one" / "scores.jsonl").exists() and not (tmp_path / "two" / "scores.jsonl").exists()
    assert main(["rescore", str(tmp_path / "two"), str(first), "--jobs", "1"]) == 0
    assert (tmp_path / "two" / "scores.jsonl").exists()
    out = tmp_path / "elsewhere.jsonl"
    assert main(["rescore", str(tmp_path / "two"), "--jobs", "1", "--out", str(out)]) == 0
    _, results = read_scores(out)
    assert [r.test for r in results] == ["math.ages"]


def test_rescore_never_imports_aiohttp() -> None:
    code = (
        "import sys, bench.cli.rescore_command, bench.scorer.rescore, bench.scorer.units, bench.scorer.scoring, "
        "bench.workspace.sandbox; "
        "import bench.scorer.evaluators; sys.exit('aiohttp' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


def test_scorer_version_is_scoring_version_parser_version_and_eight_hex_digits() -> None:
    prefix = re.escape(f"{SCORING_VERSION}.{PARSER_VERSION}.")
    assert re.fullmatch(prefix + "[0-9a-f]{8}", scorer_version())


PROBE = """
import json, os, resource, sys
limits = {name: resource.getrlimit(getattr(resource, name)) for name in
          ("RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CORE")}
print(json.dumps({"env": dict(os.environ), "cwd": os.getcwd(), "limits": limits, "isolated": sys.flags.isolated}))
"""


def test_a_program_gets_a_fresh_directory_a_minimal_environment_and_the_documented_limits() -> None:
    result = sandbox.run_python(PROBE, "", 2.0)
    if result is None:
        pytest.skip("no Python interpreter the sandbox can run")
    assert result.ok, result.stderr
    seen = json.loads(result.stdout)
    env = seen["env"]
    env.pop("LC_CTYPE", None)  # set by Python itself when the C locale is coerced (PEP 538), not by the sandbox
    assert set(env) == {"PATH", "LANG", "TZ", "HOME", "TMPDIR", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE"}
    assert env["TZ"] == "UTC"
    assert env["PATH"] == "/usr/local/bin:/usr/bin:/bin" and env["PYTHONHASHSEED"] == "0"
    assert seen["cwd"] == env["HOME"] == env["TMPDIR"] and not Path(seen["cwd"]).exists()  # deleted afterwards
    assert seen["isolated"] == 1  # python -I
    limits = {name: tuple(value) for name, value in seen["limits"].items()}
    soft, hard = limits.pop("RLIMIT_CPU")
    assert soft == 3 and hard >= soft  # the 2 s timeout + 1 s (SIGXCPU; the hard limit a second later kills)
    assert limits == {
        "RLIMIT_AS": (512 << 20, 512 << 20),
        "RLIMIT_FSIZE": (1 << 20, 1 << 20),
        "RLIMIT_NOFILE": (64, 64),
        "RLIMIT_CORE": (0, 0),
    }


def test_jobs_default_to_every_core() -> None:
    assert build_parser().parse_args(["rescore", "x"]).jobs == (os.cpu_count() or 1)
