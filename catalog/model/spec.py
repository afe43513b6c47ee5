"""What a catalog test is: the model shared by the driver (bench.catalog.driver), the simulator and the scorer.

The YAML suites under catalog/data/suites/ load into these frozen dataclasses (bench.catalog.model.loader); the JSON
Schema that validates them is catalog/data/schema/test.schema.json."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Check:
    """One evaluator applied to a test's result: its registered name, its arguments and its weight."""

    evaluator: str
    args: Mapping[str, Any] = field(default_factory=dict)
    weight: float = 1.0


@dataclass(frozen=True)
class RefCall:
    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True)
class Reference:
    """The known-good answer: final text and/or the tool calls of each assistant turn (parallel calls share one)."""

    answer: str | None = None
    turns: tuple[tuple[RefCall, ...], ...] = ()


@dataclass(frozen=True)
class Limits:
    max_turns: int = 1
    max_calls: int = 0


@dataclass(frozen=True)
class Workspace:
    """A multi-turn tool task: the fixture repository copied fresh for each run and the built-in tools offered."""

    fixture: str
    tools: tuple[str, ...]
    allow_commands: tuple[str, ...] = ()


@dataclass(frozen=True)
class TestSpec:
    id: str
    suite: str
    category: str
    subcategory: str
    description: str
    # The opening conversation as OpenAI chat messages (system prompt first when there is one).
    messages: tuple[Mapping[str, Any], ...]
    # OpenAI tool schemas ({"type": "function", "function": {...}}), built-in names already resolved.
    tools: tuple[Mapping[str, Any], ...] = ()
    # Sampling and request overrides (max_tokens, temperature, stop, response_format, tool_choice...).
    params: Mapping[str, Any] = field(default_factory=dict)
    checks: tuple[Check, ...] = ()
    reference: Reference = Reference()
    workspace: Workspace | None = None
    limits: Limits = Limits()
    # The weighted score at or above which the test passes.
    pass_threshold: float = 1.0
    # sha256 over everything that determines what a model is sent (messages, tools, params, fixture contents).
    hash: str = ""
    source: Path | None = None

    @property
    def multi_turn(self) -> bool:
        return self.workspace is not None or self.limits.max_turns > 1


@dataclass(frozen=True)
class Catalog:
    tests: Mapping[str, TestSpec]
    # sha256 over the sorted test hashes: equal hashes mean the same requests.
    hash: str
    root: Path

    def select(
        self, suites: list[str] | None = None, ids: list[str] | None = None, categories: list[str] | None = None
    ) -> list[TestSpec]:
        """The tests in any of `suites` and any of `categories` (each filter off when empty), or named in `ids`."""
        chosen = [
            t
            for t in self.tests.values()
            if (not suites or t.suite in suites)
            and (not categories or t.category in categories)
            and (not ids or t.id in ids)
        ]
        return sorted(chosen, key=lambda t: t.id)
