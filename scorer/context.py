"""What an evaluator sees: the final assistant turns of one conversation, slimmed down from parsed exchanges.

Turns keep only what scoring and the scores file need (no raw chunks, no parsed events), so a cassette's open
conversations cost little memory while it streams.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import msgspec

from bench.catalog.model import TestSpec
from bench.workspace import ToolResult, ToolWorkspace


class Call(msgspec.Struct, frozen=True, gc=False):
    """One tool call as the client assembled it. (Structs, as Turn: one is made per call of every exchange a rescore
    reads, and a frozen dataclass's fields are set one by one through object.__setattr__.)"""

    index: int
    id: str | None
    name: str
    arguments: str
    parsed: Any
    valid_json: bool

    @property
    def args(self) -> dict[str, Any]:
        """The decoded arguments when they are a JSON object, else empty (invalid JSON is typed separately)."""
        return self.parsed if isinstance(self.parsed, dict) else {}


class TurnTiming(msgspec.Struct, frozen=True, gc=False):
    """One exchange's timing as the parser measured it (vLLM's definitions, docs/report.md)."""

    ttft_us: int | None = None
    e2el_us: int | None = None
    tpot_us: float | None = None
    # Held as an int32/int64 array (bench.core.parsed.compact_itl): every result waits for the sorted write.
    itl_us: Sequence[int] = ()
    output_tokens: int | None = None
    tokens_source: str | None = None  # "usage" or "counted"
    n_events: int = 0
    loop_lag_us: int | None = None  # the recording proxy's longest event-loop stall during the exchange
    started_us: int | None = None  # wall clock at the request, microseconds since the epoch
    end_us: int | None = None  # the whole response read, microseconds after started_us


class Turn(msgspec.Struct, frozen=True, gc=False):
    """One exchange, reduced to what the client saw and its timing (made for every exchange a rescore scores: a
    Struct, built in ~0.2 us where a frozen dataclass of these fields took ~2.6)."""

    id: str
    turn: int
    attempt: int
    endpoint: str = "chat.completions"
    content: str = ""
    reasoning: str = ""
    calls: tuple[Call, ...] = ()
    finish_reason: str | None = None
    findings: tuple[str, ...] = ()
    outcome: str = "complete"
    status: int | None = 200
    streamed: bool = True
    model: str | None = None
    system_fingerprint: str | None = None
    usage: dict[str, Any] | None = None
    timing: TurnTiming = msgspec.field(default_factory=TurnTiming)
    # The cassette holding it, as results name cassettes: a run recorded by several workers is read as one, and one
    # conversation's exchanges can be in several of its shards (where ids repeat).
    cassette: str = ""


# Calls that change files: a failure of the last one means the model's edit never landed.
EDIT_TOOLS = frozenset({"apply_patch", "edit_file"})


@dataclass
class ReplayedWorkspace:
    """The fixture's final state: a fresh copy with every recorded tool call re-applied, and each call's result."""

    ws: ToolWorkspace
    fixture: Path
    results: list[tuple[Call, ToolResult]] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return self.ws.path

    @property
    def patch_failed(self) -> bool:
        """The last edit the model tried failed (earlier failures it recovered from do not count)."""
        edits = [r for c, r in self.results if c.name in EDIT_TOOLS]
        return bool(edits) and not edits[-1].ok

    def close(self) -> None:
        self.ws.close()


@dataclass
class EvalContext:
    """One conversation's final attempts, the test, and the workspace rebuilt on first use."""

    test: TestSpec
    turns: list[Turn]
    # Rebuilds the workspace (bench.scorer.workspace_replay.evaluation_context gives one to a test that has one).
    workspace_factory: Callable[[], ReplayedWorkspace] | None = None
    _workspace: ReplayedWorkspace | None = None

    @property
    def final(self) -> Turn | None:
        return self.turns[-1] if self.turns else None

    @cached_property
    def text(self) -> str:
        """The final assistant text: the last turn that said something (a last turn of tool calls says nothing)."""
        for turn in reversed(self.turns):
            if turn.content.strip():
                return turn.content
        return ""

    @cached_property
    def tool_calls(self) -> list[list[Call]]:
        return [list(t.calls) for t in self.turns]

    @cached_property
    def all_calls(self) -> list[Call]:
        return [c for t in self.turns for c in t.calls]

    @property
    def timing(self) -> TurnTiming:
        final = self.final
        return final.timing if final is not None else TurnTiming()

    @property
    def workspace(self) -> ReplayedWorkspace:
        """The fixture's final state, rebuilt by re-applying every turn's tool calls (built once, on first use)."""
        if self._workspace is None:
            if self.workspace_factory is None:
                raise ValueError(f"test {self.test.id} has no workspace")
            self._workspace = self.workspace_factory()
        return self._workspace

    def close(self) -> None:
        if self._workspace is not None:
            self._workspace.close()
            self._workspace = None

    def iter_calls(self, name: str | None = None) -> Iterator[Call]:
        return (c for c in self.all_calls if name is None or c.name == name)
