from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.core.errors import BenchError
from bench.scorer.evaluators.json_checks import extract_json
from tests.scorer.helpers import ctx, score

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
objects = st.dictionaries(st.text(max_size=5), json_values, max_size=4) | st.lists(json_values, max_size=4)
prose = st.text(alphabet=st.characters(blacklist_characters='{}[]`"\\'), max_size=20)


@given(value=objects, before=prose, after=prose)
def test_finds_the_object_in_prose(value: Any, before: str, after: str) -> None:
    assert extract_json(f"{before} {json.dumps(value)} {after}") == (True, value)


@given(first=objects, last=objects)
def test_takes_the_last_value(first: Any, last: Any) -> None:
    assert extract_json(f"draft: {json.dumps(first)}\nfinal: {json.dumps(last)}") == (True, last)


@given(value=json_values, other=objects)
def test_fenced_block_wins(value: Any, other: Any) -> None:
    text = f"Here:\n```json\n{json.dumps(value, indent=2)}\n```\nand later {json.dumps(other)}"
    assert extract_json(text) == (True, value)


def test_no_json() -> None:
    assert extract_json("nothing {here") == (False, None)
    assert score("valid_json", ctx("nothing {here")).score == 0.0
    assert score("valid_json", ctx('ok {"a": 1}')).score == 1.0


def test_json_schema() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    assert score("json_schema", ctx('{"n": 3}'), schema=schema).score == 1.0
    bad = score("json_schema", ctx('{"n": "3"}'), schema=schema)
    assert bad.score == 0.0 and "n" in bad.detail


def test_json_field_equals_is_typed() -> None:
    text = '{"a": {"b": [10, {"c": true}]}, "s": "Hi"}'
    assert score("json_field_equals", ctx(text), path="a.b.0", value=10).score == 1.0
    assert score("json_field_equals", ctx(text), path="a.b.0", value=10.0).score == 1.0
    assert score("json_field_equals", ctx(text), path="a.b.0", value="10").score == 0.0
    assert score("json_field_equals", ctx(text), path="a.b.1.c", value=True).score == 1.0
    assert score("json_field_equals", ctx(text), path="a.b.1.c", value=1).score == 0.0
    assert score("json_field_equals", ctx(text), path="s", value="hi").score == 1.0
    assert "missing" in score("json_field_equals", ctx(text), path="a.x", value=1).detail


def test_json_string_set_overlap() -> None:
    text = '{"tags": ["Red", "green", "blue"]}'
    assert score("json_string_set", ctx(text), path="tags", values=["red", "green", "blue"]).score == 1.0
    assert score("json_string_set", ctx(text), path="tags", values=["red", "green"]).score == 2 / 3
    assert score("json_string_set", ctx(text), path="tags", values=["pink"]).score == 0.0


def test_an_answer_nested_absurdly_deep_scores_zero_with_the_reason() -> None:
    deep = "[" * 5000 + "]" * 5000
    for name, args in (
        ("valid_json", {}),
        ("json_schema", {"schema": {"type": "array"}}),
        ("json_field_equals", {"path": "0", "value": 1}),
        ("json_string_set", {"path": "a", "values": ["x"]}),
    ):
        got = score(name, ctx(deep), **args)
        assert got.score == 0.0 and "nested more than 100 levels deep" in got.detail, name


def test_a_schema_and_answer_deep_but_within_limits_are_checked() -> None:
    schema: dict[str, object] = {}
    for _ in range(80):
        schema = {"type": "array", "items": schema}
    answer = "[" * 80 + "]" * 80
    assert score("json_schema", ctx(answer), schema=schema).score == 1.0


def test_an_invalid_json_schema_is_the_catalogs_mistake() -> None:
    for schema in ({"type": "nonsense"}, {"required": "n"}, {"properties": {"n": {"minimum": "zero"}}}):
        with pytest.raises(BenchError, match="schema is not a valid JSON Schema"):
            score("json_schema", ctx('{"n": 3}'), schema=schema)
    with pytest.raises(BenchError, match="schema must be a JSON Schema object"):
        score("json_schema", ctx('{"n": 3}'), schema=["type", "object"])


def test_json_schema_draft_follows_the_schema() -> None:
    # Draft 2020-12's prefixItems; under draft 4 the same keyword would be ignored and the answer would pass.
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "prefixItems": [{"type": "string"}]}
    assert score("json_schema", ctx("[1]"), schema=schema).score == 0.0
    assert score("json_schema", ctx('["a", 1]'), schema=schema).score == 1.0
    assert score("json_schema", ctx("no json"), schema={"type": "object"}).score == 0.0


def test_a_fenced_block_that_is_not_json_falls_back_to_the_text() -> None:
    assert extract_json('```\nnot json\n```\nbut {"a": 1} and {"b": 2}') == (True, {"b": 2})
    assert extract_json("```json\n[1, 2]```") == (True, [1, 2])  # no newline before the closing fence
    assert extract_json("``` \n{}\n```") == (True, {})
    assert extract_json('[1] then {"broken": } then [2, {"c": 3}] end') == (True, [2, {"c": 3}])
    assert extract_json("  [3]  ") == (True, [3])  # the whole text
    assert extract_json("{ [ {") == (False, None)
    assert extract_json('{"a": 1} is the answer') == (True, {"a": 1})  # at the very start, prose after
    assert extract_json('a stray {{"a": 1} here') == (True, {"a": 1})  # a failed start is passed by one character
    assert extract_json("so {[1] it is") == (True, [1])


def test_an_answer_deeper_than_the_limit_but_parseable_scores_zero_with_the_reason() -> None:
    deep = "[" * 150 + "]" * 150  # json reads it; 150 levels are past the 100 allowed
    got = score("valid_json", ctx(deep))
    assert got.score == 0.0 and "nested more than 100 levels deep" in got.detail


@pytest.mark.parametrize(
    ("path", "found", "value"),
    [
        ("", True, {"a": [10, 20, 30], "b": {"c": None}}),
        (".", True, {"a": [10, 20, 30], "b": {"c": None}}),
        ("a.0", True, 10),
        ("a.2", True, 30),
        ("a.3", False, None),
        ("a.-1", True, 30),
        ("a.-3", True, 10),
        ("a.-4", False, None),
        ("a.x", False, None),
        ("a.X0", False, None),
        ("b.c", True, None),  # present, and null
        ("b.d", False, None),
        ("a.0.x", False, None),
        ("b.0", False, None),
    ],
)
def test_json_field_paths(path: str, found: bool, value: Any) -> None:
    text = json.dumps({"a": [10, 20, 30], "b": {"c": None}})
    got = score("json_field_equals", ctx(text), path=path, value=value)
    if found:
        assert (got.score, got.detail) == (1.0, f"{path} = {value!r}")
    else:
        assert (got.score, got.detail) == (0.0, f"{path}: missing")


def test_json_field_equals_says_what_it_found() -> None:
    text = '{"n": 3, "s": "Hi"}'
    assert score("json_field_equals", ctx(text), path="n", value=4).detail == "n: 3 != 4"
    assert score("json_field_equals", ctx(text), path="s", value="hi").detail == "s = 'Hi'"
    assert score("json_field_equals", ctx("none"), path="n", value=4).detail == "no JSON value in the answer"


def test_json_schema_names_where_the_answer_fails() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "l": {"type": "array", "items": {"type": "string"}}},
    }
    assert score("json_schema", ctx('{"n": 3}'), schema=schema).detail == "matches the schema"
    assert score("json_schema", ctx('{"n": "3"}'), schema=schema).detail == "n: '3' is not of type 'integer'"
    assert score("json_schema", ctx('{"l": ["a", 2]}'), schema=schema).detail == "l/1: 2 is not of type 'string'"
    assert score("json_schema", ctx("[1]"), schema=schema).detail == "(root): [1] is not of type 'object'"
    missing = score("json_schema", ctx("no json here"), schema=schema)
    assert (missing.score, missing.detail) == (0.0, "no JSON value in the answer")


def test_json_string_set_reads_strings_and_numbers_and_names_misses_and_extras() -> None:
    text = '{"tags": [" Red", "GREEN", 3, null, {"x": 1}], "one": "red"}'
    got = score("json_string_set", ctx(text), path="tags", values=["red", "blue", "3"])
    assert got.score == 2 / 4 and got.detail == "missing ['blue'], extra ['green']"
    same = score("json_string_set", ctx(text), path="tags", values=["green", "RED ", "3"])
    assert (same.score, same.detail) == (1.0, "same set")
    assert score("json_string_set", ctx(text), path="one", values=["red"]).detail == "one: not a list"
    assert score("json_string_set", ctx(text), path="nope", values=["red"]).detail == "nope: not a list"
    assert score("json_string_set", ctx("no json"), path="tags", values=["red"]).detail == "no JSON value in the answer"


def test_valid_json_says_so() -> None:
    assert score("valid_json", ctx("[1]")).detail == "valid JSON"
    assert score("valid_json", ctx("nope")).detail == "no JSON value in the answer"


def test_a_schema_nested_too_deeply_to_check_is_the_catalogs_mistake() -> None:
    schema: dict[str, object] = {}
    for _ in range(3000):
        schema = {"items": schema}
    with pytest.raises(BenchError, match="schema is nested too deeply to check; flatten it"):
        score("json_schema", ctx("[]"), schema=schema)
