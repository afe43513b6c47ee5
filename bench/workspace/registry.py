"""The workspace tools' registry: each tool is a function plus the OpenAI function schema the model is offered."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ToolContext:
    """What a tool may touch: the workspace root (resolved) and the commands it may run."""

    root: Path
    allow_commands: tuple[tuple[str, ...], ...] = ()
    command_timeout: float = 10.0


ToolFn = Callable[[ToolContext, Mapping[str, Any]], str]


@dataclass(frozen=True)
class ToolDef:
    name: str
    description: str
    parameters: Mapping[str, Any]
    fn: ToolFn
    # What a call is validated against when it may be laxer than what the model is shown (None: `parameters`).
    accepts: Mapping[str, Any] | None = None

    @property
    def validation_schema(self) -> Mapping[str, Any]:
        return self.accepts if self.accepts is not None else self.parameters

    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)},
        }


TOOLS: dict[str, ToolDef] = {}


def tool(
    name: str, description: str, parameters: Mapping[str, Any], *, accepts: Mapping[str, Any] | None = None
) -> Callable[[ToolFn], ToolFn]:
    """Register a workspace tool under `name` with the schema the model sees."""

    def register(fn: ToolFn) -> ToolFn:
        TOOLS[name] = ToolDef(name, description, parameters, fn, accepts)
        return fn

    return register


def truncate(text: str, limit: int) -> str:
    """At most `limit` characters, keeping the head and the tail (where test failures and summaries are)."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit} characters cut ...]\n{text[-tail:]}"
