"""The evaluator names a catalog check may use, with the JSON Schema of each one's arguments.

This is the catalog's side of the contract with the scorer (which registers an implementation under each name): the
loader rejects an unknown name or a misspelt argument when the suite is loaded, not when a run is scored.
"""

from __future__ import annotations

from typing import Any


def _obj(required: tuple[str, ...] = (), **properties: Any) -> dict[str, Any]:
    return {"type": "object", "required": list(required), "additionalProperties": False, "properties": properties}


_STR: dict[str, Any] = {"type": "string"}
_STRS: dict[str, Any] = {"type": "array", "items": {"type": "string"}, "minItems": 1}
_BOOL: dict[str, Any] = {"type": "boolean"}
_NUM: dict[str, Any] = {"type": "number"}
_POS: dict[str, Any] = {"type": "number", "exclusiveMinimum": 0}
_COUNT: dict[str, Any] = {"type": "integer", "minimum": 0}
_ANY: dict[str, Any] = {}
_ARGV: dict[str, Any] = {"type": "array", "items": {"type": "string"}, "minItems": 1}

EVALUATOR_ARGS: dict[str, dict[str, Any]] = {
    # Text, applied to the final assistant message.
    "equals": _obj(("value",), value=_STR, case_sensitive=_BOOL),
    "exact_token": _obj(("value",), value=_STR),
    "contains_all": _obj(("values",), values=_STRS, case_sensitive=_BOOL),
    "contains_any": _obj(("values",), values=_STRS, case_sensitive=_BOOL),
    "contains_none": _obj(("values",), values=_STRS, case_sensitive=_BOOL),
    "regex": _obj(("pattern",), pattern=_STR, ignore_case=_BOOL),
    "mentions": _obj(("value",), value=_STR),
    "numeric": _obj(("value",), value=_NUM, tolerance=_NUM, relative=_BOOL),
    # JSON.
    "valid_json": _obj(),
    "json_schema": _obj(("schema",), schema={"type": "object"}),
    "json_field_equals": _obj(("path", "value"), path=_STR, value=_ANY),
    "json_string_set": _obj(("path", "values"), path=_STR, values=_STRS),
    # Tool calls.
    "tool_called": _obj(name=_STR),
    "no_tool_call": _obj(),
    "first_tool": _obj(("name",), name=_STR),
    "tool_args": _obj(("name", "args"), name=_STR, args={"type": "object", "minProperties": 1}),
    "tool_sequence": _obj(("names",), names=_STRS),
    "parallel_calls": _obj(("names",), names=_STRS),
    "call_count": _obj(name=_STR, min=_COUNT, max=_COUNT),
    "forbidden_tools": _obj(("names",), names=_STRS),
    # Multi-turn workspace, on the fixture's final state.
    "file_exists": _obj(("path",), path=_STR),
    "file_contains": {**_obj(("path",), path=_STR, value=_STR, regex=_STR), "minProperties": 2},
    "file_not_contains": _obj(("path", "value"), path=_STR, value=_STR),
    "file_unchanged": _obj(("path",), path=_STR),
    "command_succeeds": _obj(("command",), command=_ARGV, expect_exit={"type": "integer"}),
    # Code execution.
    "python_output": _obj(("expected_stdout",), expected_stdout=_STR, stdin=_STR, harness=_STR, timeout_s=_POS),
    "c_output": _obj(("expected_stdout",), expected_stdout=_STR, stdin=_STR, timeout_s=_POS),
    # Timing.
    "ttft_under": _obj(("ms",), ms=_POS),
    "total_under": _obj(("ms",), ms=_POS),
    "tokens_per_second_over": _obj(("value",), value=_POS),
}

EVALUATOR_NAMES: tuple[str, ...] = tuple(sorted(EVALUATOR_ARGS))

# Checks whose `name`/`names` argument must be one of the test's tools.
TOOL_NAME_ARGS: dict[str, str] = {
    "tool_called": "name",
    "first_tool": "name",
    "tool_args": "name",
    "tool_sequence": "names",
    "parallel_calls": "names",
    "call_count": "name",
}
