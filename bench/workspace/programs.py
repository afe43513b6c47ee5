"""run_command: an allow-listed program run without a shell, in the sandbox, on the workspace."""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Mapping, Sequence
from typing import Any

from bench.workspace import sandbox
from bench.workspace.paths import ToolError
from bench.workspace.registry import ToolContext, tool, truncate

MAX_OUTPUT = 8_000
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
# "python"/"python3" run the sandbox's interpreter (bench's own when the sandbox can run it), so that the driver and
# the offline scorer execute fixture tests with the same Python whatever the host's PATH holds.
PYTHON_NAMES = frozenset({"python", "python3"})


def parse_allow(entries: Sequence[str]) -> tuple[tuple[str, ...], ...]:
    """Allow-list entries as argv prefixes: "python3" allows any python3 command, "python3 -m unittest" only that."""
    allowed = []
    for entry in entries:
        words = tuple(shlex.split(entry))
        if words:
            allowed.append(words)
    return tuple(allowed)


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
    """Run argv in the sandbox on the workspace (bench.workspace.sandbox, writable, kept): (exit status, or None when
    killed at the time or output limit; stdout and stderr together). Raises SandboxUnavailable."""
    if argv[0] in PYTHON_NAMES:
        python = sandbox.python_interpreter()
        program, extra = (python.path, python.extra_ro) if python is not None else (None, ())
    else:
        program, extra = shutil.which(argv[0], path=SAFE_PATH), ()
    if program is None:
        raise ToolError(f"{argv[0]}: command not found")
    limits = sandbox.Limits(timeout_s=ctx.command_timeout, memory_bytes=1 << 30, file_bytes=64 << 20)
    result = sandbox.Sandbox(ctx.root).run(
        [program, *argv[1:]], limits=limits, keep=True, merge_stderr=True, extra_ro=extra
    )
    killed = result.timed_out or result.output_limited or result.process_limited
    return (None if killed else result.exit_code), result.stdout + (f"\n[{result.describe()}]" if killed else "")


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
        raise CommandFailed(f"killed: time, output or process limit (time limit {ctx.command_timeout:g} s)", output)
    if status != 0:
        raise CommandFailed(f"exit status {status}", output)
    return f"exit status 0\n{output}"


class CommandFailed(ToolError):
    """A command that ran but failed: the model still sees its output."""

    def __init__(self, message: str, output: str) -> None:
        super().__init__(message)
        self.output = f"{message}\n{output}"
