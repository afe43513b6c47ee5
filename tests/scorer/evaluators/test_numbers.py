from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.errors import BenchError
from scorer.evaluators.numbers import extract_number
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
