"""Token counts from a response's `usage`, whichever API wrote it.

Chat Completions and legacy Completions say `prompt_tokens` / `completion_tokens` (cached input under
`prompt_tokens_details.cached_tokens`); the Responses API says `input_tokens` / `output_tokens` (cached input under
`input_tokens_details.cached_tokens`); Embeddings only `prompt_tokens`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Tokens:
    input: int | None = None
    cached_input: int | None = None
    output: int | None = None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def usage_tokens(usage: Mapping[str, Any] | None) -> Tokens:
    if not isinstance(usage, Mapping):
        return Tokens()
    if "input_tokens" in usage or "output_tokens" in usage:
        details = usage.get("input_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
        return Tokens(_int(usage.get("input_tokens")), _int(cached), _int(usage.get("output_tokens")))
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    return Tokens(_int(usage.get("prompt_tokens")), _int(cached), _int(usage.get("completion_tokens")))
