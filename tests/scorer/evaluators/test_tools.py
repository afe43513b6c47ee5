from __future__ import annotations

import datetime

import pytest

from bench.core.errors import BenchError
from bench.scorer.evaluators.values import match_value, normalize_path
from bench.scorer.registry import ArgError
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


@pytest.mark.parametrize(
    ("got", "want", "equal"),
    [
        (True, True, True),
        (False, True, False),
        (0, False, False),  # a number is never a boolean, either way round
        (False, 0, False),
        (None, None, True),
        ("", None, False),
        (None, "", False),
        ([1, 2], [1, 2, 3], False),
        ([1, 2, 3], [1, 2], False),
        ((1, "A"), [1, "a"], True),
        ("[1]", [1], False),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}, True),
        ({"a": 2}, {"a": 1}, False),
        ([{"a": 1}], {"a": 1}, False),
        (" Paris ", "paris", True),
        (1, "1", False),
    ],
)
def test_literals_compare_by_type(got: object, want: object, equal: bool) -> None:
    assert match_value(True, got, want)[0] is equal


def test_exact_compares_strings_as_they_are_inside_lists_and_objects_too() -> None:
    assert match_value(True, ["Paris"], {"exact": ["Paris"]})[0] is True
    assert match_value(True, ["Paris"], {"exact": ["paris"]})[0] is False
    assert match_value(True, {"c": " Paris"}, {"exact": {"c": "Paris"}})[0] is False
    assert match_value(True, {"c": [" Paris"]}, {"c": ["paris"]})[0] is True


def test_matchers_on_values_of_the_wrong_type_do_not_match() -> None:
    assert match_value(True, 12, {"contains": "1"})[0] is False
    assert match_value(True, 12, {"regex": "1"})[0] is False
    assert match_value(True, ["a.py"], {"path": "a.py"})[0] is False
    assert match_value(True, "PARIS", {"contains": "aRi"})[0] is True  # contains ignores case
    assert match_value(True, "Paris", {"regex": "^par"})[0] is False  # a regex does not
    assert match_value(True, "say paris", {"regex": "par"})[0] is True  # search, not match
    assert match_value(True, "C", {"one_of": ["c", "f"]})[0] is True
    assert match_value(True, None, {"one_of": [None]})[0] is True


def test_a_one_key_object_whose_key_is_no_matcher_is_a_literal() -> None:
    assert match_value(True, {"city": "Paris"}, {"city": "paris"})[0] is True
    assert match_value(False, None, {"city": "paris"}) == (False, "missing")


def test_why_an_argument_did_not_match() -> None:
    assert match_value(True, "Rome", "Paris") == (False, "'Rome' != 'Paris'")
    assert match_value(True, "Rome", {"exact": "Paris"}) == (False, "'Rome' != 'Paris'")
    assert match_value(True, "Rome", {"one_of": ["Paris", "Lyon"]}) == (False, "'Rome' not one of ['Paris', 'Lyon']")
    assert match_value(False, None, {"one_of": ["Paris"]}) == (False, "missing")
    assert match_value(True, "Rome", {"contains": "par"}) == (False, "'Rome' does not contain 'par'")
    assert match_value(True, "Rome", {"regex": "^P"}) == (False, "'Rome' does not match /^P/")
    assert match_value(True, "b.py", {"path": "a.py"}) == (False, "'b.py' is not the path 'a.py'")
    assert match_value(True, "x", {"any": True}) == (True, "")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"one_of": "c"}, "one_of must be a list"),
        ({"contains": 1}, "contains must be a string"),
        ({"regex": 1}, "regex must be a string"),
        ({"regex": "("}, "regex '(' is invalid: missing ), unterminated subpattern at position 0"),
        ({"path": 1}, "path must be a string"),
    ],
)
def test_a_malformed_matcher_is_the_catalogs_mistake(spec: object, message: str) -> None:
    with pytest.raises(ArgError) as raised:
        match_value(True, "x", spec)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("/abs/x.py", "abs/x.py"),
        ("//x.py", "x.py"),
        ("./././x.py", "x.py"),
        ("  a/b.py  ", "a/b.py"),
        ("a/./b/../c.py", "a/c.py"),
        (".", ""),
        ("", ""),
        ("/", ""),
        ("a\\b.py", "a/b.py"),
        ("/Xdir/X.py", "Xdir/X.py"),
    ],
)
def test_normalize_path_spellings(raw: str, want: str) -> None:
    assert normalize_path(raw) == want


def test_tool_evaluators_say_what_was_called() -> None:
    c = ctx(calls=[[call("a", {}), call("b", {})], [call("a", {})]])
    assert score("tool_called", c, name="a").detail == "called a"
    assert score("tool_called", c, name="z").detail == "z not called (called a, b, a)"
    assert score("tool_called", ctx("hello")).detail == "no tool not called"
    assert score("tool_called", ctx("hello"), name="z").detail == "z not called"
    assert score("no_tool_call", c).detail == "called a, b, a"
    assert score("no_tool_call", ctx("hello")).detail == "no tool call"
    assert score("first_tool", c, name="a").detail == "first call a"
    assert score("first_tool", c, name="b").detail == "first call a, expected b"
    assert (score("first_tool", ctx("hello"), name="a").score, score("first_tool", ctx("hello"), name="a").detail) == (
        0.0,
        "no tool call",
    )
    assert score("tool_args", c, name="a", args={"x": {"one_of": [None]}}).detail == "arguments match"
    assert score("tool_args", c, name="z", args={"x": 1}).detail == "z not called"
    assert score("tool_sequence", c, names=["a", "b"]).detail == "in order"
    assert score("tool_sequence", c, names=["b", "b"]).detail == "stopped before b (called a, b, a)"
    assert score("tool_sequence", ctx("hello"), names=["a"]).detail == "stopped before a (called nothing)"
    assert score("parallel_calls", c, names=["b", "a"]).detail == "turn 0 called a, b"
    assert score("parallel_calls", c, names=["b", "b"]).detail == "not in one turn: a, b | a"
    assert score("parallel_calls", ctx("hello"), names=["a"]).detail == "not in one turn: no calls"
    assert score("call_count", c, name="a", min=2).detail == "2 call(s) of a in [2, ]"
    assert score("call_count", c, max=2).detail == "3 call(s) of any tool outside [, 2]"
    assert score("forbidden_tools", c, names=["b", "a", "z"]).detail == "called forbidden a, b"
    assert score("forbidden_tools", c, names=["z"]).detail == "no forbidden tool"


def test_call_count_bounds_are_inclusive() -> None:
    c = ctx(calls=[[call("a", {}), call("a", {})], [call("b", {})]])
    assert score("call_count", c, name="a", min=2, max=2).score == 1.0
    assert score("call_count", c, min=3).score == 1.0 and score("call_count", c, min=4).score == 0.0
    assert score("call_count", c, max=3).score == 1.0 and score("call_count", c, max=2).score == 0.0
    assert score("call_count", c, name="z", max=0).score == 1.0


def test_tool_args_takes_the_best_call_and_counts_only_that_ones_matchers() -> None:
    c = ctx(calls=[[call("f", {"a": 1, "b": 9, "c": 9})], [call("f", {"a": 1, "b": 2, "c": 9})], [call("f", {"a": 9})]])
    s = score("tool_args", c, name="f", args={"a": 1, "b": 2, "c": 3})
    assert (s.score, s.detail) == (pytest.approx(2 / 3), "c: 9 != 3")
    first_best = ctx(calls=[[call("f", {"a": 1})], [call("f", {"a": 1, "b": 5})]])
    s = score("tool_args", first_best, name="f", args={"a": 1, "b": 2})
    assert (s.score, s.detail) == (0.5, "b: missing")  # two calls tie: the first one's problems are shown


def test_other_literals_compare_with_equality() -> None:
    # A literal of a type JSON does not have (a date, from Python; the catalog's YAML keeps dates as text) equals
    # only an equal value, never the text a JSON answer could hold.
    day = datetime.date(2024, 1, 5)
    assert match_value(True, datetime.date(2024, 1, 5), day)[0] is True
    assert match_value(True, datetime.date(2024, 1, 6), day)[0] is False
    assert match_value(True, "2024-01-05", day)[0] is False


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("Paris", "'Lyon' != 'Paris'"),
        ({"exact": "Paris"}, "'Lyon' != 'Paris'"),
        ({"one_of": ["Paris", "Rome"]}, "'Lyon' not one of ['Paris', 'Rome']"),
        ({"contains": "par"}, "'Lyon' does not contain 'par'"),
        ({"regex": "^P"}, "'Lyon' does not match /^P/"),
        ({"path": "Paris"}, "'Lyon' is not the path 'Paris'"),
    ],
)
def test_a_mismatch_says_why_and_a_match_says_nothing(spec: object, why: str) -> None:
    assert match_value(True, "Lyon", spec) == (False, why)
    assert match_value(True, "Paris", spec) == (True, "")
