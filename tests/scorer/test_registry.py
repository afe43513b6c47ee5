from __future__ import annotations

import enum
from typing import Annotated, Any, Literal

import msgspec
import pytest

from bench.catalog.model import Check
from bench.core.errors import BenchError
from bench.scorer.checks import evaluator_schemas, evaluator_versions, run_check, validate_checks
from bench.scorer.context import TurnTiming
from bench.scorer.registry import EVALUATORS, ArgError, EvalContext, Score, arg_problem, evaluator
from bench.scorer.results import CheckScore
from bench.scorer.scoring import score_conversation
from bench.scorer.signature import (
    REQUIRED,
    Count,
    JsonObject,
    Matchers,
    Positive,
    Strings,
    ToolName,
    explain,
    json_schema,
    must_be,
    type_name,
)
from tests.scorer.helpers import ctx, spec, turn


def test_unknown_evaluator_names_test_and_check() -> None:
    test = spec([Check("equals", {"value": "a"}), Check("nope", {})], id="s.bad")
    with pytest.raises(BenchError, match=r"test s\.bad: check 2 uses unknown evaluator 'nope'"):
        score_conversation(test, [turn("a")])


@pytest.mark.parametrize(
    ("args", "message"),
    [({}, "missing argument"), ({"value": "a", "cased": True}, "unknown argument"), ({"value": 3}, "must be a string")],
)
def test_bad_arguments(args: dict[str, Any], message: str) -> None:
    test = spec([Check("equals", args)], id="s.args")
    with pytest.raises(BenchError, match=rf"test s\.args: check 1 \(equals\).*{message}"):
        run_check(EvalContext(test, [turn("a")]), 0, test.checks[0])


def test_one_of_arguments() -> None:
    test = spec([Check("file_contains", {"path": "a", "value": "x", "regex": "y"})])
    with pytest.raises(BenchError, match="exactly one of value, regex"):
        run_check(EvalContext(test, [turn("a")]), 0, test.checks[0])


def test_weighted_mean_and_threshold() -> None:
    checks = [Check("contains_all", {"values": ["a", "b"]}, 3.0), Check("equals", {"value": "zz"}, 1.0)]
    result = score_conversation(spec(checks, pass_threshold=0.7), [turn("a b")])
    assert result.score == 0.75 and result.passed is True
    result = score_conversation(spec(checks, pass_threshold=0.8), [turn("a")])
    assert result.score == 0.375 and result.passed is False
    assert [c.evaluator for c in result.checks] == ["contains_all", "equals"]
    assert result.checks[0] == CheckScore(
        evaluator="contains_all",
        version=1,
        args={"values": ["a", "b"]},
        weight=3.0,
        status="scored",
        score=0.5,
        passed=False,
        detail="missing 'b'",
    )


def test_skipped_checks_are_excluded() -> None:
    checks = [Check("ttft_under", {"ms": 1}), Check("equals", {"value": "a"})]
    result = score_conversation(spec(checks), [turn("a", timing=TurnTiming())])
    assert result.status == "scored" and result.score == 1.0
    assert result.checks[0].status == "skipped"
    result = score_conversation(spec(checks[:1]), [turn("a", timing=TurnTiming())])
    assert result.status == "skipped" and result.score is None


def test_register_and_version() -> None:
    @evaluator("_test_always", version=3)
    def always(c: EvalContext) -> Score:
        return Score(1.0, "yes")

    try:
        assert evaluator_versions()["_test_always"] == 3
        ev = EVALUATORS["_test_always"]
        assert (ev.needs_workspace, ev.one_of, ev.doc, ev.group, ev.params) == (False, (), "", "test_registry", ())
        assert run_check(ctx("x"), 0, Check("_test_always", {})).score == 1.0
        with pytest.raises(RuntimeError, match="registered twice"):
            evaluator("_test_always")(always)
    finally:
        del EVALUATORS["_test_always"]


def test_the_signature_declares_the_arguments() -> None:
    seen: list[dict[str, Any]] = []

    @evaluator()
    def _test_signature(
        c: EvalContext, *, word: str, limit: Positive = 2, mode: Literal["a", "b"] = "a", tool: ToolName | None = None
    ) -> Score:
        """scores what it is told"""
        seen.append({"word": word, "limit": limit, "mode": mode, "tool": tool})
        return Score(1.0)

    try:
        ev = EVALUATORS["_test_signature"]
        assert ev.doc == "scores what it is told" and ev.tool_args == ("tool",)
        assert ev.schema["required"] == ["word"] and ev.schema["additionalProperties"] is False
        assert ev.schema["properties"]["limit"] == {"type": "number", "exclusiveMinimum": 0, "default": 2}
        assert ev.schema["properties"]["mode"] == {"enum": ["a", "b"], "default": "a"}
        assert ev.schema["properties"]["tool"] == {"type": "string"}  # omit it for none; an explicit null is a typo
        run_check(ctx("x"), 0, Check("_test_signature", {"word": "w", "limit": 3}))
        assert seen == [{"word": "w", "limit": 3.0, "mode": "a", "tool": None}]
        assert isinstance(seen[0]["limit"], float)  # coerced to the declared type
        for args, message in [
            ({"word": 1}, "word must be a string, not int"),
            ({"word": "w", "limit": 0}, "limit: expected float > 0"),
            ({"word": "w", "mode": "c"}, "mode: invalid enum value 'c'"),
            ({"word": "w", "limit": True}, "limit must be a number, not bool"),
        ]:
            with pytest.raises(BenchError, match=rf"check 1 \(_test_signature\): {message}.*; fix the catalog$"):
                run_check(ctx("x"), 0, Check("_test_signature", args))
    finally:
        del EVALUATORS["_test_signature"]


def test_a_signature_that_is_not_a_declaration_is_refused() -> None:
    def positional(c: EvalContext, word: str) -> Score:
        return Score(1.0)

    def untyped(c: EvalContext, *, word) -> Score:  # type: ignore[no-untyped-def]
        return Score(1.0)

    with pytest.raises(TypeError, match="keyword-only"):
        evaluator("_test_positional")(positional)
    with pytest.raises(TypeError, match="no type annotation"):
        evaluator("_test_untyped")(untyped)
    assert "_test_positional" not in EVALUATORS and "_test_untyped" not in EVALUATORS


def test_argument_name_errors_say_what_is_allowed() -> None:
    def fail(name: str, args: dict[str, Any]) -> str:
        with pytest.raises(BenchError) as info:
            run_check(ctx("x"), 0, Check(name, args))
        return str(info.value)

    assert fail("equals", {"value": "a", "cased": 1, "b": 2}) == (
        "test t.one: check 1 (equals): unknown argument(s) b, cased (allowed: case_sensitive, value); fix the catalog"
    )
    assert fail("valid_json", {"x": 1}).endswith("unknown argument(s) x (allowed: none); fix the catalog")
    assert fail("json_field_equals", {}).endswith("missing argument(s) path, value; fix the catalog")
    assert fail("tool_sequence", {"names": ["a", 3]}).endswith("names must be a list of strings; fix the catalog")
    assert fail("contains_all", {"values": []}).endswith("values: expected array of length >= 1; fix the catalog")
    assert fail("no_such", {}) == (
        f"test t.one: check 1 uses unknown evaluator 'no_such'; use one of: {', '.join(sorted(EVALUATORS))}"
    )


@pytest.mark.parametrize(
    ("args", "ok"),
    [
        ({"path": "a"}, False),
        ({"path": "a", "value": "x", "regex": "y"}, False),
        ({"path": "a", "value": "x"}, True),
        ({"path": "a", "regex": "y"}, True),
        ({"path": "a", "value": "x", "regex": None}, True),
    ],
)
def test_one_of_needs_exactly_one(args: dict[str, Any], ok: bool) -> None:
    ev = EVALUATORS["file_contains"]
    if ok:
        assert ev.bind(args) == {"value": None, "regex": None, **args}
        assert arg_problem(ev, {k: v for k, v in args.items() if v is not None}) is None
    else:
        with pytest.raises(ArgError, match=r"^give exactly one of value, regex$"):
            ev.bind(args)
        assert arg_problem(ev, args) == ([], "give exactly one of value, regex")
        with pytest.raises(BenchError, match=r"^test t\.one: check 1 \(file_contains\): give exactly one"):
            validate_checks(spec([Check("file_contains", args)]))


def test_arg_problem_reports_the_schema_path_first() -> None:
    ev = EVALUATORS["tool_args"]
    assert arg_problem(ev, {"name": "f", "args": {}}) == (["args"], "{} should be non-empty")
    assert arg_problem(ev, {"name": 3, "args": {"a": 1}}) == (["name"], "3 is not of type 'string'")
    assert arg_problem(ev, {"name": "f", "args": {"a": 1}}) is None
    validate_checks(spec([Check("tool_args", {"name": "f", "args": {"a": 1}})]))  # no error


def test_registration_records_the_declaration() -> None:
    @evaluator(one_of=[("a", "b")], needs_workspace=True)
    def _test_declared(c: EvalContext, *, a: int | None = None, b: int | None = None, c_: str) -> Score:
        """A required argument may follow optional ones after `*`."""
        return Score(0.5)

    try:
        ev = EVALUATORS["_test_declared"]
        assert ev.bind({"c_": "x", "b": 2}) == {"a": None, "b": 2, "c_": "x"}
        assert ev.schema["required"] == ["c_"] and ev.doc == "A required argument may follow optional ones after `*`."
        assert (ev.version, ev.one_of, ev.needs_workspace, ev.group) == (1, (("a", "b"),), True, "test_registry")
        assert EVALUATORS["equals"].needs_workspace is False and EVALUATORS["file_exists"].needs_workspace is True
        assert EVALUATORS["numeric"].group == "numbers"
    finally:
        del EVALUATORS["_test_declared"]

    def stray(c: EvalContext, *, a: int = 0) -> Score:
        return Score(1.0)

    with pytest.raises(TypeError, match=r"^evaluator _test_stray: one_of names \('a', 'z'\) that are not all"):
        evaluator("_test_stray", one_of=[("a", "z")])(stray)
    with pytest.raises(TypeError, match="one_of names"):
        evaluator("_test_stray", one_of=[("a", "a", "z")])(stray)
    evaluator("_test_stray", one_of=[("a",)])(stray)  # a group may be all the arguments it names
    del EVALUATORS["_test_stray"]


@pytest.mark.parametrize(("raw", "clamped"), [(1.5, 1.0), (-0.5, 0.0), (0.25, 0.25), (1.0, 1.0)])
def test_scores_are_clamped_keeping_detail_and_status(raw: float, clamped: float) -> None:
    @evaluator("_test_raw")
    def raw_score(c: EvalContext) -> Score:
        return Score(raw, "why", "skipped")

    try:
        assert run_check(ctx("x"), 0, Check("_test_raw", {})) == Score(clamped, "why", "skipped")
    finally:
        del EVALUATORS["_test_raw"]


def test_score_constructors() -> None:
    assert Score.of(True, "d") == Score(1.0, "d", "scored") and Score.of(False) == Score(0.0, "", "scored")
    assert Score.skipped("no timing") == Score(0.0, "no timing", "skipped")


def test_builtin_schemas_are_pinned() -> None:
    # Computed afresh, not read from the evaluators' cached schemas.
    schemas = {name: json_schema(ev.name, ev.params, ev.doc) for name, ev in EVALUATORS.items()}
    assert schemas == evaluator_schemas()
    assert schemas["call_count"] == {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "min": {"type": "integer", "minimum": 0},
            "max": {"type": "integer", "minimum": 0},
        },
        "required": [],
        "additionalProperties": False,
        "description": "number of calls (of that name) within bounds",
    }
    assert schemas["python_output"]["properties"]["timeout_s"] == {
        "type": "number",
        "exclusiveMinimum": 0,
        "default": 5,
    }
    assert schemas["python_output"]["required"] == ["expected_stdout"]
    assert schemas["numeric"]["properties"]["tolerance"] == {"type": "number", "default": 1e-6}
    assert schemas["json_field_equals"]["properties"]["value"] == {}
    assert schemas["tool_sequence"]["properties"]["names"] == {
        "type": "array",
        "items": {"type": "string"},
        "minItems": 1,
    }
    assert EVALUATORS["tool_sequence"].tool_args == ("names",) and EVALUATORS["forbidden_tools"].tool_args == ()
    assert EVALUATORS["call_count"].tool_args == ("name",) and EVALUATORS["tool_args"].tool_args == ("name",)


def test_type_words() -> None:
    assert [must_be(t) for t in (str, float, int, bool, Any, list[int], dict[str, int], Literal["x", 2])] == [
        "a string",
        "a number",
        "an integer",
        "true or false",
        "any value",
        "a list of integers",
        "an object",
        "one of 'x', 2",
    ]
    assert [type_name(t) for t in (Strings, Positive, Count | None, Matchers, JsonObject, Literal["x", "y"])] == [
        "non-empty list of strings",
        "number > 0",
        "integer ≥ 0",
        "non-empty object",
        "object",
        "'x' \\| 'y'",
    ]
    assert must_be(Matchers) == "a map of argument names to matchers" and must_be(int | None) == "an integer"
    assert type_name(Annotated[float, msgspec.Meta(lt=1)]) == "number < 1"
    assert type_name(Annotated[int, msgspec.Meta(ge=1, le=9)]) == "integer ≥ 1 ≤ 9"


class Mode(enum.Enum):
    FAST = "fast"
    SLOW = "slow"


def test_enums_and_untyped_defaults_in_the_schema() -> None:
    @evaluator(one_of=[("a", "b", "c")])
    def _test_enum(
        ctx: EvalContext, *, mode: Mode = Mode.FAST, extra: Any = None, a: int = 0, b: int = 0, c: int | None = 3
    ) -> Score:
        return Score(1.0)

    try:
        ev = EVALUATORS["_test_enum"]
        schema = json_schema(ev.name, ev.params, ev.doc)
        assert schema["$defs"] == {"Mode": {"title": "Mode", "enum": ["fast", "slow"]}}
        assert schema["properties"]["mode"] == {"$ref": "#/$defs/Mode", "default": "fast"}
        assert schema["properties"]["extra"] == {"default": None}
        assert schema["properties"]["c"] == {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": 3}
        assert "description" not in schema and schema["required"] == []
        assert arg_problem(ev, {"mode": "medium", "a": 1}) == (["mode"], "'medium' is not one of ['fast', 'slow']")
        assert ev.bind({"mode": "slow", "b": 1})["mode"] is Mode.SLOW
        assert ev.bind({"a": 1}) == {"mode": Mode.FAST, "extra": None, "a": 1, "b": 0, "c": 3}
        with pytest.raises(ArgError, match="give exactly one of a, b, c"):
            ev.bind({"a": 1, "b": 2})
    finally:
        del EVALUATORS["_test_enum"]


def test_explain_without_a_path_and_the_odd_types() -> None:
    exc = msgspec.ValidationError("Expected `object`, got `int`")
    assert explain(exc, {}, {}) == "Expected object, got int"
    assert must_be(int | str) == "int | str" and must_be(Mode) == "Mode" and repr(REQUIRED) == "REQUIRED"


def test_validate_checks_names_the_test_and_check_of_an_unknown_evaluator() -> None:
    test = spec([Check("equals", {"value": "a"}), Check("nope", {})], id="s.v")
    with pytest.raises(BenchError, match=r"^test s\.v: check 2 uses unknown evaluator 'nope'"):
        validate_checks(test)


def test_a_checks_arguments_are_bound_once_and_never_shared_when_mutable() -> None:
    seen: list[tuple[str, list[str]]] = []

    @evaluator("_test_bound")
    def bound(c: EvalContext, *, value: str, values: Strings | None = None) -> Score:
        seen.append((value, values if values is not None else []))
        if values is not None:
            values.append("mutated")  # an evaluator that changes its list must not change the next call's
        return Score(1.0, "yes")

    ev = EVALUATORS["_test_bound"]
    binds = 0
    real_bind = ev.bind

    def counting(args: Any) -> dict[str, Any]:
        nonlocal binds
        binds += 1
        return real_bind(args)

    object.__setattr__(ev, "bind", counting)
    try:
        scalar = Check("_test_bound", {"value": "a"})
        for _ in range(3):
            run_check(ctx("x"), 0, scalar)
        assert binds == 1  # the same mapping, the same contents: bound once
        scalar.args["value"] = "b"  # the mapping changed in place: bound again, the new value seen
        run_check(ctx("x"), 0, scalar)
        assert (binds, seen[-1][0]) == (2, "b")
        listed = Check("_test_bound", {"value": "c", "values": ["p"]})
        for _ in range(2):
            run_check(ctx("x"), 0, listed)
        assert binds == 4  # a list is bound afresh for every call
        assert [v for _, v in seen[-2:]] == [["p", "mutated"], ["p", "mutated"]]
        with pytest.raises(BenchError, match="missing argument"):
            run_check(ctx("x"), 0, Check("_test_bound", {}))
    finally:
        del EVALUATORS["_test_bound"]
