"""JSON evaluators: the answer's JSON value is the first fenced code block, else the whole text, else the last
JSON object or array in the text."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import jsonschema

from bench.nesting import TooDeep, check_depth
from scorer.evaluators._args import string, strings
from scorer.evaluators.values import values_equal
from scorer.registry import REQUIRED, ArgError, EvalContext, Score, evaluator

_FENCED = re.compile(r"```[\w+-]*[ \t]*\n?(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()
_MISSING = object()


def extract_json(text: str) -> tuple[bool, Any]:
    """(found, value): the first fenced block if it parses, else the whole text, else the last object/array.
    TooDeep if the JSON is nested deeper than the parser (or MAX_DEPTH) allows."""
    try:
        found, value = _extract_json(text)
    except RecursionError:
        raise TooDeep() from None
    if found:
        check_depth(value)
    return found, value


def _extract_json(text: str) -> tuple[bool, Any]:
    m = _FENCED.search(text)
    if m is not None:
        try:
            return True, json.loads(m.group(1))
        except ValueError:
            pass
    try:
        return True, json.loads(text)
    except ValueError:
        pass
    found: tuple[bool, Any] = (False, None)
    i = 0
    n = len(text)
    while i < n:
        starts = [p for p in (text.find("{", i), text.find("[", i)) if p >= 0]
        if not starts:
            break
        i = min(starts)
        try:
            value, end = _DECODER.raw_decode(text, i)
        except ValueError:
            i += 1
            continue
        found = (True, value)
        i = end
    return found


def lookup(value: Any, path: str) -> Any:
    """`a.b.0` into nested objects and arrays; _MISSING when a step does not exist."""
    if path in ("", "."):
        return value
    for step in path.split("."):
        if isinstance(value, dict) and step in value:
            value = value[step]
        elif isinstance(value, list) and step.lstrip("-").isdigit() and -len(value) <= int(step) < len(value):
            value = value[int(step)]
        else:
            return _MISSING
    return value


NO_JSON = "no JSON value in the answer"


def _answer(ctx: EvalContext) -> tuple[bool, Any, str]:
    """(found, value, why not): an answer nested absurdly deep is scored as holding no usable JSON, with that reason."""
    try:
        found, value = extract_json(ctx.text)
    except TooDeep as exc:
        return False, None, f"the answer's JSON is {exc}"
    return found, value, NO_JSON


@evaluator("valid_json")
def valid_json(ctx: EvalContext, args: Mapping[str, Any]) -> Score:
    ok, _, why = _answer(ctx)
    return Score.of(ok, "valid JSON" if ok else why)


@evaluator("json_schema", args={"schema": REQUIRED})
def json_schema(ctx: EvalContext, args: Mapping[str, Any]) -> Score:
    schema = args["schema"]
    if not isinstance(schema, Mapping):
        raise ArgError("schema must be a JSON Schema object")
    try:
        validator_cls = jsonschema.validators.validator_for(schema)
        validator_cls.check_schema(dict(schema))
    except jsonschema.SchemaError as exc:
        raise ArgError(f"schema is not a valid JSON Schema: {exc.message}") from None
    except RecursionError:
        raise ArgError("schema is nested too deeply to check; flatten it") from None
    ok, value, why = _answer(ctx)
    if not ok:
        return Score(0.0, why)
    try:
        error = jsonschema.exceptions.best_match(validator_cls(schema).iter_errors(value))
    except RecursionError:
        return Score(0.0, "the answer is nested too deeply to check against the schema")
    if error is None:
        return Score(1.0, "matches the schema")
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return Score(0.0, f"{where}: {error.message}")


@evaluator("json_field_equals", args={"path": REQUIRED, "value": REQUIRED})
def json_field_equals(ctx: EvalContext, args: Mapping[str, Any]) -> Score:
    path = string(args, "path")
    ok, doc, why = _answer(ctx)
    if not ok:
        return Score(0.0, why)
    got = lookup(doc, path)
    if got is _MISSING:
        return Score(0.0, f"{path}: missing")
    equal = values_equal(got, args["value"])
    return Score.of(equal, f"{path} = {got!r}" if equal else f"{path}: {got!r} != {args['value']!r}")


@evaluator("json_string_set", args={"path": REQUIRED, "values": REQUIRED})
def json_string_set(ctx: EvalContext, args: Mapping[str, Any]) -> Score:
    """Jaccard overlap of the strings at `path` with `values` (case-folded, trimmed): misses and extras both cost."""
    path = string(args, "path")
    want = {v.strip().casefold() for v in strings(args, "values")}
    ok, doc, why = _answer(ctx)
    if not ok:
        return Score(0.0, why)
    got_raw = lookup(doc, path)
    if got_raw is _MISSING or not isinstance(got_raw, list):
        return Score(0.0, f"{path}: not a list")
    got = {str(v).strip().casefold() for v in got_raw if isinstance(v, str | int | float)}
    union = want | got
    score = len(want & got) / len(union) if union else 1.0
    missing = sorted(want - got)
    extra = sorted(got - want)
    detail = "same set" if score == 1.0 else f"missing {missing}, extra {extra}"
    return Score(score, detail)
