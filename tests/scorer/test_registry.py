from __future__ import annotations

from typing import Any, Literal

import pytest

from bench.errors import BenchError
from catalog.model import Check
from scorer.registry import EVALUATORS, EvalContext, Score, evaluator, evaluator_versions, run_check
from scorer.results import CheckScore
from scorer.scoring import score_conversation
from scorer.signature import Positive, ToolName
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
    result = score_conversation(spec(checks), [turn("a", timing={})])
    assert result.status == "scored" and result.score == 1.0
    assert result.checks[0].status == "skipped"
    result = score_conversation(spec(checks[:1]), [turn("a", timing={})])
    assert result.status == "skipped" and result.score is None


def test_register_and_version() -> None:
    @evaluator("_test_always", version=3)
    def always(c: EvalContext) -> Score:
        return Score(1.0, "yes")

    try:
        assert evaluator_versions()["_test_always"] == 3
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
