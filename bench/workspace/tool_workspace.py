"""ToolWorkspace: a fresh copy of a fixture repository and the calls a model makes on it."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import jsonschema
import orjson

from bench.core.errors import BenchError
from bench.workspace import files as _files
from bench.workspace import programs as _programs
from bench.workspace import sandbox
from bench.workspace.paths import ToolError
from bench.workspace.registry import TOOLS, ToolContext

# Importing the tool modules registers them; keep the names referenced so linters see the side effect as intended.
_REGISTERED = (_files, _programs)

WORKSPACE_TOOLS: tuple[str, ...] = ("read_file", "list_dir", "grep", "edit_file", "apply_patch", "run_command")


@dataclass(frozen=True)
class ToolResult:
    """What one tool call did: `output` for the model, `ok` False with `error` for a model mistake or a failure."""

    output: str
    ok: bool
    error: str | None = None

    @property
    def content(self) -> str:
        """The text to send back to the model as the tool message."""
        if self.ok:
            return self.output
        return self.output if self.output else f"error: {self.error}"


def workspace_tool_schemas(names: Sequence[str]) -> list[dict[str, Any]]:
    """The OpenAI function schemas of the named workspace tools, in the order given."""
    unknown = [n for n in names if n not in TOOLS]
    if unknown:
        raise BenchError(f"unknown workspace tool(s) {', '.join(unknown)}; choose from {', '.join(WORKSPACE_TOOLS)}")
    return [TOOLS[n].schema() for n in names]


def _ignore(_dir: str, names: list[str]) -> list[str]:
    return [n for n in names if n == "__pycache__" or n.endswith(".pyc")]


class ToolWorkspace:
    """A temporary copy of a fixture; a context manager that deletes it. Never raises for a model's mistakes."""

    def __init__(self, path: Path, ctx: ToolContext, tools: Sequence[str] | None = None) -> None:
        self.path = path
        self._ctx = ctx
        self._tools = tuple(tools) if tools is not None else WORKSPACE_TOOLS
        self.calls = 0

    @classmethod
    def create(
        cls,
        source: Path,
        allow_commands: Sequence[str] = (),
        *,
        tools: Sequence[str] | None = None,
        command_timeout: float = 10.0,
    ) -> ToolWorkspace:
        base = Path(tempfile.mkdtemp(prefix="bench-ws-"))
        path = (base / "repo").resolve()
        shutil.copytree(source, path, symlinks=True, ignore=_ignore)
        # Commands run in the sandbox as its user (when bench is root): the copy must be theirs to write.
        sandbox.hand_over(base)
        ctx = ToolContext(
            root=path, allow_commands=_programs.parse_allow(allow_commands), command_timeout=command_timeout
        )
        return cls(path, ctx, tools)

    def call(self, name: str, arguments: str | bytes | Mapping[str, Any] | None) -> ToolResult:
        self.calls += 1
        definition = TOOLS.get(name)
        if definition is None or name not in self._tools:
            return ToolResult("", False, f"unknown tool {name!r}; available: {', '.join(self._tools)}")
        try:
            args = _decode(arguments)
            jsonschema.validate(args, definition.validation_schema)
        except ToolError as exc:
            return ToolResult("", False, str(exc))
        except jsonschema.ValidationError as exc:
            where = ".".join(str(p) for p in exc.absolute_path)
            return ToolResult("", False, f"invalid arguments for {name}: {where + ': ' if where else ''}{exc.message}")
        try:
            return ToolResult(definition.fn(self._ctx, args), True)
        except _programs.CommandFailed as exc:
            return ToolResult(exc.output, False, str(exc))
        except ToolError as exc:
            return ToolResult("", False, str(exc))
        except OSError as exc:
            return ToolResult("", False, f"{name} failed: {exc.strerror or exc}")

    def run(self, argv: Sequence[str]) -> tuple[int | None, str]:
        """Run a command in the sandbox on the workspace bypassing the allow-list (for checks such as
        command_succeeds). Raises SandboxUnavailable."""
        return _programs.run_argv(self._ctx, list(argv))

    def close(self) -> None:
        shutil.rmtree(self.path.parent, ignore_errors=True)

    def __enter__(self) -> ToolWorkspace:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _decode(arguments: str | bytes | Mapping[str, Any] | None) -> dict[str, Any]:
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, Mapping):
        return dict(arguments)
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError as exc:
        raise ToolError(f"arguments are not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ToolError("arguments must be a JSON object")
    return value
