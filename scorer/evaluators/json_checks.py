"""JSON evaluators: the answer's JSON value is the first fenced code block, else the whole text, else the last
JSON object or array in the text."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema

from bench.core.nesting import TooDeep, check_depth
from bench.scorer.evaluators.values import values_equal
from bench.scorer.registry import ArgError, EvalContext, Score, evaluator
from bench.scorer.signature import JsonObject, Strings

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
def valid_json(ctx: EvalContext) -> Score:
    """a JSON value was found"""
    ok, _, why = _answer(ctx)
    return Score.of(ok, "valid JSON" if ok else why)


@evaluator("json_schema")
def json_schema(ctx: EvalContext, *, schema: JsonObject) -> Score:
    """the value validates (jsonschema, draft from `$schema`); detail names the failing path"""
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


@evaluator("json_field_equals")
def json_field_equals(ctx: EvalContext, *, path: str, value: Any) -> Score:
    """typed compare (below) of the value at `path` (`a.b.0`)"""
    ok, doc, why = _answer(ctx)
    if not ok:
        return Score(0.0, why)
    got = lookup(doc, path)
    if got is _MISSING:
        return Score(0.0, f"{path}: missing")
    equal = values_equal(got, value)
    return Score.of(equal, f"{path} = {got!r}" if equal else f"{path}: {got!r} != {value!r}")


@evaluator("json_string_set")
def json_string_set(ctx: EvalContext, *, path: str, values: Strings) -> Score:
    """Jaccard overlap of the strings at `path` with `values` (trimmed, case-folded): misses and extras both cost"""
    want = {v.strip().casefold() for v in values}
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
