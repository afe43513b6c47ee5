"""The layers and the rule against import cycles (pyproject.toml, [tool.importlinter]), checked by import-linter on
every run of the suite, and one real import that shows the scoring side starts without aiohttp."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
EXCEPT = [":!tests/test_packaging.py"]


def test_every_import_linter_contract_is_kept() -> None:
    result = subprocess.run(
        [str(BIN / "lint-imports"), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr


def test_the_scoring_side_starts_without_aiohttp() -> None:
    # import-linter reads imports as text; this runs them (a lazy import added at run time would show here).
    modules = "bench.cli.rescore_command, bench.cli.report_command, bench.scorer.rescore, bench.scorer.evaluators"
    code = f"import sys, {modules}; sys.exit('aiohttp' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr or "the scoring side imported aiohttp"


def test_no_module_is_imported_by_its_folder_name() -> None:
    # proxy/, catalog/ and scorer/ are bench.proxy, bench.catalog and bench.scorer: importing them by the folder's
    # own name would load a second copy of every module (two registries, two loggers).
    bad = subprocess.run(
        # (tests/test_packaging.py writes a user's project whose own packages are named so.)
        ["git", "grep", "-nE", r"^\s*(from|import) (proxy|catalog|scorer)\b", "--", "*.py", "scripts/*", *EXCEPT],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout
    assert bad == "", bad
