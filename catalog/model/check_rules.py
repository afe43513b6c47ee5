"""What the catalog's loader asks of the evaluators its checks name: the scorer's registry answers (given to the
loader by its caller), so the catalog never imports the scorer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class CheckRules(Protocol):
    def known(self, name: str) -> bool:
        """Whether an evaluator of this name exists."""
        ...

    def problem(self, name: str, args: Mapping[str, Any]) -> tuple[list[str | int], str] | None:
        """(path inside args, message) for arguments the evaluator cannot be scored with, else None."""
        ...

    def tool_args(self, name: str) -> tuple[str, ...]:
        """The evaluator's arguments whose value names one of the test's tools."""
        ...
