"""run_command: an allow-listed program run without a shell, in the workspace, with a timeout and a bare environment."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from bench.workspace.paths import ToolError
from bench.workspace.registry import ToolContext, tool, truncate

MAX_OUTPUT = 8_000
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
# "python"/"python3" run the interpreter bench runs on, so that the driver and the offline scorer execute fixture
# tests with the same Python whatever the host's PATH holds.
PYTHON_NAMES = frozenset({"python", "python3"})


def parse_allow(entries: Sequence[str]) -> tuple[tuple[str, ...], ...]:
    """Allow-list entries as argv prefixes: "python3" allows any python3 command, "python3 -m unittest" only that."""
    allowed = []
    for entry in entries:
        words = tuple(shlex.split(entry))
        if words:
            allowed.append(words)
    return tuple(allowed)


def minimal_env(root: str) -> dict[str, str]:
    return {
        "PATH": SAFE_PATH,
        "HOME": root,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",  # a fixture's date tests give the same answer on every machine
        "PYTHONDONTWRITEBYTECODE": "1",  # no __pycache__ litter that would change listings and file checks
        "PYTHONHASHSEED": "0",
        "PYTHONIOENCODING": "utf-8",
        "TMPDIR": root,
    }


def _argv(raw: object) -> list[str]:
    if isinstance(raw, str):
        try:
            argv = shlex.split(raw)
        except ValueError as exc:
            raise ToolError(f"cannot split the command: {exc}") from None
    elif isinstance(raw, list) and all(isinstance(a, str) for a in raw):
        argv = list(raw)
    else:
        raise ToolError('command must be a list of argument strings, e.g. ["python3", "-m", "unittest"]')
    if not argv:
        raise ToolError("command is empty")
    return argv


def run_argv(ctx: ToolContext, argv: list[str]) -> tuple[int | None, str]:
    """Run argv in the workspace: (exit status or None on timeout, combined output)."""
    program = sys.executable if argv[0] in PYTHON_NAMES else shutil.which(argv[0], path=SAFE_PATH)
    if program is None:
        raise ToolError(f"{argv[0]}: command not found")
    env = dict(ctx.env) or minimal_env(str(ctx.root))
    try:
        proc = subprocess.Popen(
            [program, *argv[1:]],
            cwd=ctx.root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so a timeout kills its children too
        )
    except OSError as exc:
        raise ToolError(f"{argv[0]}: cannot run: {exc.strerror}") from None
    try:
        out, _ = proc.communicate(timeout=ctx.command_timeout)
        status: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        status = None
    return status, out.decode("utf-8", errors="replace")


@tool(
    "run_command",
    "Run an allowed command in the repository root (no shell: give the program and its arguments as a list). "
    "Returns its exit status and output.",
    {
        "type": "object",
        "properties": {
            "command": {
                "type": "array",
                "items": {"type": "string"},
                "description": 'Program and arguments, e.g. ["python3", "-m", "unittest"].',
            }
        },
        "required": ["command"],
    },
    # Models often send a command line as one string: split with shlex (never a shell) rather than refuse it.
    accepts={"type": "object", "properties": {"command": {"type": ["array", "string"]}}, "required": ["command"]},
)
def run_command(ctx: ToolContext, args: Mapping[str, Any]) -> str:
    argv = _argv(args["command"])
    if not any(tuple(argv[: len(prefix)]) == prefix for prefix in ctx.allow_commands):
        allowed = ", ".join(" ".join(p) for p in ctx.allow_commands) or "none"
        raise ToolError(f"command not allowed: {argv[0]!r} (allowed: {allowed})")
    status, output = run_argv(ctx, argv)
    output = truncate(output, MAX_OUTPUT)
    if status is None:
        raise CommandFailed(f"timed out after {ctx.command_timeout:g} s", output)
    if status != 0:
        raise CommandFailed(f"exit status {status}", output)
    return f"exit status 0\n{output}"


class CommandFailed(ToolError):
    """A command that ran but failed: the model still sees its output."""

    def __init__(self, message: str, output: str) -> None:
        super().__init__(message)
        self.output = f"{message}\n{output}"
