"""Replay match options: how a request finds its recording when agents put volatile values in their requests.

Strict by default: a request matches a recording when their fingerprints are equal (bench.core.fingerprint). Multi-turn
agent traffic can stop matching after its first turn when requests carry values that change every run: tool-call ids
a client generates, timestamps or request ids in prompts, tracing metadata. Three named options relax the match,
each applied the same way to recorded and live requests before they are compared (docs/proxy.md, "Matching"):

- `ignore` (JSON paths): drop these fields of the JSON body. Dotted keys, `*` for any key or list index:
  `metadata`, `messages.*.name`, `input.*.id`.
- `tool_call_ids`: tool-call ids (`tool_calls[].id`, `tool_call_id`, the Responses API's `call_id` and function-call
  item `id`) are renumbered in order of first appearance, so `call_abc` / `call_xyz` in two runs both read `call_0`.
- `blank` (regular expressions): matches are removed from message text (`content`, `text`, `output`,
  `instructions`, `prompt`, and a string `input`).

The options are recorded in the replay cassette's header (`settings.match`), so a run states how it was matched.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from bench.core.cassette.records import MatchSettings
from bench.core.errors import BenchError
from bench.core.fingerprint import canonical_body, canonical_query

TEXT_KEYS = frozenset({"content", "text", "output", "instructions", "prompt", "input"})
CALL_ITEM_TYPES = frozenset({"function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output"})


@dataclass(frozen=True)
class MatchOptions:
    ignore: tuple[str, ...] = ()
    tool_call_ids: bool = False
    blank: tuple[str, ...] = ()

    @property
    def strict(self) -> bool:
        return not (self.ignore or self.tool_call_ids or self.blank)

    def describe(self) -> MatchSettings:
        return MatchSettings(
            strict=self.strict, ignore=list(self.ignore), tool_call_ids=self.tool_call_ids, blank=list(self.blank)
        )

    def key(self, method: str, path: str, query: str, body: bytes, fp: str) -> str:
        """The fingerprint when strict; otherwise a fingerprint of the request as these options normalise it."""
        if self.strict:
            return fp
        canon = canonical_body(body)
        if canon is None:
            return fp
        canon = self.normalise(canon)
        digest = hashlib.sha256()
        qs = "&".join(f"{k}={v}" for k, v in canonical_query(query))
        digest.update(f"{method.upper()} {path.rstrip('/') or '/'}?{qs}\n".encode())
        digest.update(json.dumps(canon, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode())
        return f"m1:{digest.hexdigest()[:32]}"

    def normalise(self, value: Any) -> Any:
        for path in self.ignore:
            value = _drop(value, path.split("."))
        if self.tool_call_ids:
            value = _renumber(value, {})
        if self.blank:
            patterns = [re.compile(p) for p in self.blank]
            value = _blank(value, patterns, None)
        return value


def match_options(ignore: list[str] | None, tool_call_ids: bool, blank: list[str] | None) -> MatchOptions:
    """Options from the command line, checked: a bad path or regular expression is one line naming it."""
    for path in ignore or ():
        if not path or any(not part for part in path.split(".")):
            raise BenchError(f"--match-ignore {path!r}: give a dotted JSON path such as metadata or messages.*.name")
    for pattern in blank or ():
        try:
            re.compile(pattern)
        except re.error as exc:
            raise BenchError(f"--match-blank {pattern!r}: not a regular expression ({exc})") from None
    return MatchOptions(tuple(ignore or ()), tool_call_ids, tuple(blank or ()))


def _drop(value: Any, parts: list[str]) -> Any:
    if not parts:
        return value
    head, rest = parts[0], parts[1:]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if head in ("*", k):
                if not rest:
                    continue
                out[k] = _drop(v, rest)
            else:
                out[k] = v
        return out
    if isinstance(value, list):
        if head == "*":
            return [_drop(v, rest) for v in value] if rest else []
        if head.isdigit():
            i = int(head)
            return [(_drop(v, rest) if j == i else v) for j, v in enumerate(value) if rest or j != i]
    return value


def _renumber(value: Any, ids: dict[str, str]) -> Any:
    if isinstance(value, list):
        return [_renumber(v, ids) for v in value]
    if not isinstance(value, dict):
        return value
    is_call = "function" in value or value.get("type") in CALL_ITEM_TYPES
    out: dict[str, Any] = {}
    for k, v in value.items():
        if isinstance(v, str) and (k in ("tool_call_id", "call_id") or (k == "id" and is_call)):
            out[k] = ids.setdefault(v, f"call_{len(ids)}")
        else:
            out[k] = _renumber(v, ids)
    return out


def _blank(value: Any, patterns: list[re.Pattern[str]], key: str | None) -> Any:
    if isinstance(value, str):
        if key in TEXT_KEYS:
            for pattern in patterns:
                value = pattern.sub("", value)
        return value
    if isinstance(value, list):
        # A list under a text key holds content parts or input items: their own text keys are blanked.
        return [_blank(v, patterns, None) for v in value]
    if isinstance(value, dict):
        return {k: _blank(v, patterns, k) for k, v in value.items()}
    return value
