from __future__ import annotations

import pytest

from bench.catalog import FIXTURES_DIR
from bench.workspace import ToolWorkspace, sandbox

MINILIB = FIXTURES_DIR / "minilib"


def test_allowed_command_runs_in_the_workspace() -> None:
    with ToolWorkspace.create(MINILIB, ["python3"]) as ws:
        result = ws.call("run_command", {"command": ["python3", "-c", "import os; print(os.getcwd())"]})
        assert result.ok, result
        assert result.output == f"exit status 0\n{sandbox.MOUNT}\n"  # the workspace, where the sandbox shows it


def test_failing_command_reports_status_and_output() -> None:
    with ToolWorkspace.create(MINILIB, ["python3"]) as ws:
        result = ws.call("run_command", {"command": ["python3", "-m", "unittest", "tests.test_stats"]})
        assert not result.ok and result.error == "exit status 1"
        assert "ZeroDivisionError" in result.output and result.content == result.output


def test_allow_list_by_program_and_by_prefix() -> None:
    with ToolWorkspace.create(MINILIB, ["python3 check.py"]) as ws:
        refused = ws.call("run_command", {"command": ["python3", "-c", "print(1)"]})
        assert not refused.ok and "not allowed" in (refused.error or "")
        assert not ws.call("run_command", {"command": ["sh", "-c", "true"]}).ok
        ran = ws.call("run_command", {"command": ["python3", "check.py"]})
        assert "Ran 18 tests" in ran.output


def test_no_command_allowed_by_default() -> None:
    with ToolWorkspace.create(MINILIB) as ws:
        result = ws.call("run_command", {"command": ["python3", "--version"]})
        assert not result.ok and "allowed: none" in (result.error or "")


def test_string_command_is_split_without_a_shell() -> None:
    with ToolWorkspace.create(MINILIB, ["python3"]) as ws:
        result = ws.call("run_command", {"command": "python3 -c 'print(\"a; b\")'"})
        assert result.ok and result.output.endswith("a; b\n")


def test_environment_is_minimal() -> None:
    code = "import os, json; print(json.dumps(sorted(os.environ)))"
    with ToolWorkspace.create(MINILIB, ["python3"]) as ws:
        result = ws.call("run_command", {"command": ["python3", "-c", code]})
    names = set(result.output.splitlines()[1].strip('[]"').split('", "'))
    assert "PATH" in names and "PYTHONDONTWRITEBYTECODE" in names
    assert not any(n.endswith(("KEY", "TOKEN")) for n in names)
    assert "VIRTUAL_ENV" not in names


def test_timeout_kills_the_command() -> None:
    with ToolWorkspace.create(MINILIB, ["python3"], command_timeout=0.5) as ws:
        result = ws.call(
            "run_command", {"command": ["python3", "-c", "import time; print('start', flush=True); time.sleep(30)"]}
        )
    assert not result.ok and "time limit 0.5 s" in (result.error or "") and "killed: time limit" in result.output
    assert "start" in result.output


def test_output_is_truncated_keeping_the_tail() -> None:
    code = "print('x' * 50000); print('THE END')"
    with ToolWorkspace.create(MINILIB, ["python3"]) as ws:
        result = ws.call("run_command", {"command": ["python3", "-c", code]})
    assert result.ok and len(result.output) < 9000 and result.output.rstrip().endswith("THE END")
    assert "characters cut" in result.output


@pytest.mark.parametrize("command", [[], [""], [1, 2], "", "unclosed 'quote"])
def test_bad_commands_are_model_errors(command: object) -> None:
    with ToolWorkspace.create(MINILIB, ["python3"]) as ws:
        assert not ws.call("run_command", {"command": command}).ok


def test_python_is_the_sandbox_interpreter() -> None:
    # The same interpreter at record time and at every rescore on this machine, whatever PATH holds.
    python = sandbox.python_interpreter()
    assert python is not None
    with ToolWorkspace.create(MINILIB, ["python"]) as ws:
        result = ws.call("run_command", {"command": ["python", "-c", "import sys; print(sys.executable)"]})
    assert result.ok and result.output.splitlines()[1] == python.path
