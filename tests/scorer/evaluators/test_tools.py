from __future__ import annotations

import pytest

from bench.errors import BenchError
from scorer.evaluators.values import match_value, normalize_path
from tests.scorer.helpers import call, ctx, score

PARIS = call("get_weather", {"city": "Paris", "unit": "c", "days": 3, "flag": True})


@pytest.mark.parametrize(
    ("got", "spec", "ok"),
    [
        ("Paris", "paris", True),
        ("Paris", {"exact": "paris"}, False),
        ("Paris", {"exact": "Paris"}, True),
        (3, 3.0, True),
        (3, "3", False),
        (True, 1, False),
        (1, True, False),
        ("Paris, France", {"contains": "paris"}, True),
        ("2024-01-05", {"regex": r"^\d{4}-\d\d-\d\d$"}, True),
        ("c", {"one_of": ["c", "celsius"]}, True),
        ("k", {"one_of": ["c", "celsius"]}, False),
        ("./src//app.py", {"path": "src/app.py"}, True),
        ("/src/app.py", {"path": "src/app.py"}, True),
        ("src/other.py", {"path": "src/app.py"}, False),
        ([1, "A"], [1, "a"], True),
        ({"x": 1}, {"x": 1.0}, True),
        ({"x": 1, "y": 2}, {"x": 1}, False),
        ("anything", {"any": True}, True),
    ],
)
def test_match_value(got: object, spec: object, ok: bool) -> None:
    assert match_value(True, got, spec)[0] is ok


def test_missing_argument() -> None:
    assert match_value(False, None, {"any": True})[0] is False
    assert match_value(False, None, {"one_of": [None, "c"]})[0] is True
    assert match_value(False, None, "x")[0] is False


def test_normalize_path() -> None:
    assert normalize_path("a\\b\\..\\c/") == "a/c"
    assert normalize_path("./") == ""


def test_tool_called_and_no_tool_call() -> None:
    c = ctx(calls=[[PARIS]])
    assert score("tool_called", c).score == 1.0
    assert score("tool_called", c, name="get_weather").score == 1.0
    assert score("tool_called", c, name="get_time").score == 0.0
    assert score("no_tool_call", c).score == 0.0
    assert score("no_tool_call", ctx("hello")).score == 1.0
    assert score("tool_called", ctx("hello")).score == 0.0


def test_first_tool() -> None:
    c = ctx(calls=[[call("get_time", {"tz": "UTC"}), PARIS]])
    assert score("first_tool", c, name="get_time").score == 1.0
    assert score("first_tool", c, name="get_weather").score == 0.0


def test_tool_args_best_call_partial_credit() -> None:
    c = ctx(calls=[[call("get_weather", {"city": "Lyon", "unit": "c"}), PARIS]])
    assert score("tool_args", c, name="get_weather", args={"city": "Paris", "unit": "c"}).score == 1.0
    s = score("tool_args", c, name="get_weather", args={"city": "Rome", "unit": "c"})
    assert s.score == 0.5 and "city" in s.detail
    assert score("tool_args", c, name="get_time", args={"tz": {"any": True}}).score == 0.0
    with pytest.raises(BenchError, match="args must be a map of argument names to matchers"):
        score("tool_args", c, name="get_weather", args=["city"])


def test_tool_sequence_in_order_with_gaps() -> None:
    c = ctx(calls=[[call("a", {})], [call("x", {}), call("b", {})], [call("c", {})]])
    assert score("tool_sequence", c, names=["a", "b", "c"]).score == 1.0
    assert score("tool_sequence", c, names=["b", "a"]).score == 0.5
    assert score("tool_sequence", c, names=["c", "a", "b"]).score == pytest.approx(1 / 3)


def test_parallel_calls_need_one_turn() -> None:
    together = ctx(calls=[[call("a", {}, 0), call("b", {}, 1), call("a", {}, 2)]])
    apart = ctx(calls=[[call("a", {})], [call("b", {})]])
    assert score("parallel_calls", together, names=["a", "b"]).score == 1.0
    assert score("parallel_calls", together, names=["a", "a", "b"]).score == 1.0
    assert score("parallel_calls", together, names=["b", "b"]).score == 0.0
    assert score("parallel_calls", apart, names=["a", "b"]).score == 0.0


def test_call_count_and_forbidden() -> None:
    c = ctx(calls=[[call("a", {}), call("a", {})], [call("b", {})]])
    assert score("call_count", c, min=3, max=3).score == 1.0
    assert score("call_count", c, name="a", max=1).score == 0.0
    assert score("call_count", c, name="b", min=2).score == 0.0
    with pytest.raises(BenchError, match="give min, max or both"):
        score("call_count", c)
    assert score("forbidden_tools", c, names=["z"]).score == 1.0
    assert score("forbidden_tools", c, names=["b", "z"]).score == 0.0


def test_a_missing_argument_is_never_counted_as_present() -> None:
    c = ctx(calls=[[call("get_weather", {"city": "Paris"})]])
    for spec in ({"any": True}, "celsius", {"exact": "c"}, {"contains": "c"}, {"regex": "."}, {"path": "c"}):
        s = score("tool_args", c, name="get_weather", args={"city": "Paris", "unit": spec})
        assert s.score == 0.5 and s.detail == "unit: missing", spec
    # Only a one_of that lists null accepts an absent argument.
    assert score("tool_args", c, name="get_weather", args={"unit": {"one_of": [None, "c"]}}).score == 1.0
    assert score("tool_args", c, name="get_weather", args={"unit": {"one_of": ["c"]}}).score == 0.0
    # An argument given as null is present (its value is None), not missing.
    nulled = ctx(calls=[[call("get_weather", {"city": "Paris", "unit": None})]])
    assert score("tool_args", nulled, name="get_weather", args={"unit": {"any": True}}).score == 1.0


@pytest.mark.parametrize(
    ("got", "want", "equal"),
    [
        (100, 100.0, True),
        (100, 100 + 1e-10, True),  # float noise
        (100, 100.5, False),  # within 1%: a different number
        (100, 101, False),
        (0.1 + 0.2, 0.3, True),
        (0, 1e-13, True),
        (0, 1e-6, False),
        (-5, 5, False),
    ],
)
def test_numbers_are_equal_only_up_to_float_noise(got: float, want: float, equal: bool) -> None:
    assert match_value(True, got, want)[0] is equal
    assert match_value(True, {"x": [got]}, {"x": [want]})[0] is equal
