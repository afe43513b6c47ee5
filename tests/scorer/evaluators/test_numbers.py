from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.core.errors import BenchError
from bench.scorer.evaluators.numbers import extract_number
from tests.scorer.helpers import ctx, score


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("42", 42),
        ("The answer is 42.", 42),
        ("We have 3 apples and 4 pears, so the total is 7.", 7),
        ("Answer: -1,234.5 dollars", -1234.5),
        ("x = 2, y = 3, so x*y = 6", 6),
        ("\\boxed{17} because 3 + 14", 17),
        ("reasoning 1 2 3\n#### 99\nthanks 5", 99),
        ("about 3/4 of them", 0.75),
        ("roughly 1.5e3 units", 1500),
        ("a loss of −7 points", -7),
        ("It costs $12.50.", 12.5),
        ("45% of them", 45),
        ("value .5", 0.5),
    ],
)
def test_extract_number(text: str, want: float) -> None:
    got = extract_number(text)
    assert got is not None and math.isclose(got, want)


def test_no_number() -> None:
    assert extract_number("no digits here") is None
    assert score("numeric", ctx("none"), value=1).score == 0.0


_templates = st.sampled_from(["{}", "The answer is {}.", "After 3 steps, the result: {}", "So we get\n#### {}"])


@given(value=st.integers(min_value=-(10**12), max_value=10**12), template=_templates, commas=st.booleans())
def test_extracts_any_integer(value: int, template: str, commas: bool) -> None:
    text = template.format(f"{value:,}" if commas else str(value))
    assert extract_number(text) == value


@given(
    value=st.floats(min_value=-1e9, max_value=1e9, allow_nan=False, allow_infinity=False),
    template=_templates,
)
def test_extracts_any_float(value: float, template: str) -> None:
    got = extract_number(template.format(repr(value)))
    assert got is not None and math.isclose(got, value, rel_tol=1e-12, abs_tol=1e-300)


def test_numeric_tolerance_and_relative() -> None:
    assert score("numeric", ctx("about 100.4"), value=100, tolerance=0.5).score == 1.0
    assert score("numeric", ctx("about 100.4"), value=100).score == 0.0
    assert score("numeric", ctx("about 101"), value=100, tolerance=0.02, relative=True).score == 1.0
    assert score("numeric", ctx("about 103"), value=100, tolerance=0.02, relative=True).score == 0.0


def test_numeric_default_tolerance_is_tiny_and_absolute() -> None:
    assert score("numeric", ctx("The answer is 100.5"), value=100).score == 0.0  # 0.5% off
    assert score("numeric", ctx("The answer is 100.0000001"), value=100).score == 1.0
    assert score("numeric", ctx("The answer is 0.3"), value=0.1 + 0.2).score == 1.0
    # Relative tolerance scales with the expected value; absolute does not.
    assert score("numeric", ctx("2000"), value=1000, tolerance=1, relative=True).score == 1.0
    assert score("numeric", ctx("2001"), value=1000, tolerance=1, relative=True).score == 0.0
    assert score("numeric", ctx("1001"), value=1000, tolerance=1).score == 1.0
    assert score("numeric", ctx("1002"), value=1000, tolerance=1).score == 0.0
    with pytest.raises(BenchError, match="tolerance must not be negative"):
        score("numeric", ctx("1"), value=1, tolerance=-1)
    with pytest.raises(BenchError, match="value must be a number"):
        score("numeric", ctx("1"), value="1")


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("\\boxed{x} then \\boxed{} and 5", 5.0),  # boxes without numbers are passed over
        ("\\boxed{3} and later \\boxed{4, 5}", 5.0),  # the last box, its last number
        ("\\boxed{2} \\boxed{no}", 2.0),
        ("#### none\nthe answer is 8", 8.0),  # a `####` line without a number is passed over
        ("#### 3 and 4\n", 3.0),  # its first number
        ("#### 1\nmore\n#### 2", 2.0),  # the last such line
        ("the answer is 4, then 5; result: 6 or 7", 6.0),  # the first number after the last marker
        ("total is 12 items", 12.0),
        ("x = y, and 9", 9.0),
        ("answer: none. 3 and 4", 3.0),
        ("-5", -5.0),
        ("+5", 5.0),
        ("1/0", math.inf),
        ("−3/4", -0.75),
        ("1,000 and 2,50", 50.0),
        ("2e-3", 0.002),
        ("1.5E+2", 150.0),
        ("−.25", -0.25),
        ("3.14.15", 3.14),
        ("v2", None),
        ("a.5", None),
    ],
)
def test_which_number_answers(text: str, want: float | None) -> None:
    assert extract_number(text) == want


def test_the_tolerance_is_inclusive_and_relative_scales_with_the_value() -> None:
    assert score("numeric", ctx("10.5"), value=10, tolerance=0.5).score == 1.0
    assert score("numeric", ctx("9.5"), value=10, tolerance=0.5).score == 1.0
    assert score("numeric", ctx("10.5"), value=10, tolerance=0.25).score == 0.0
    assert score("numeric", ctx("-11"), value=-10, tolerance=0.1, relative=True).score == 1.0  # |value| scales it
    assert score("numeric", ctx("-12"), value=-10, tolerance=0.1, relative=True).score == 0.0
    assert score("numeric", ctx("0"), value=0, tolerance=0.0).score == 1.0
    assert score("numeric", ctx("3"), value=3, tolerance=0).detail == "3 ≈ 3"
    assert score("numeric", ctx("2.5"), value=3).detail == "2.5 != 3"
    assert score("numeric", ctx("none"), value=3).detail == "no number in the answer"
