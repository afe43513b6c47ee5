"""What a simulated model decides to say, before it is encoded as a stream or a JSON body."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.catalog.model import TestSpec


@dataclass(frozen=True)
class SimCall:
    name: str
    # Raw text, as a model emits it: flawed profiles need to send JSON that does not parse.
    arguments: str


@dataclass(frozen=True)
class Reply:
    content: str = ""
    tool_calls: tuple[SimCall, ...] = ()
    finish_reason: str | None = None

    @property
    def finish(self) -> str:
        return self.finish_reason or ("tool_calls" if self.tool_calls else "stop")


@dataclass(frozen=True)
class SimRequest:
    """A chat request as a behaviour sees it, with the catalog test it belongs to when the sim recognises it."""

    model: str
    body: Mapping[str, Any]
    messages: Sequence[Mapping[str, Any]]
    tools: Sequence[Mapping[str, Any]]
    test: TestSpec | None = None
    # Assistant messages after the test's opening conversation: which turn of a multi-turn task this is.
    turn: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def tool_names(self) -> list[str]:
        names: list[str] = []
        for tool in self.tools:
            fn = tool.get("function") if isinstance(tool, Mapping) else None
            if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
                names.append(fn["name"])
        return names
