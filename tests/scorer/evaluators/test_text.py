from __future__ import annotations

import pytest

from bench.errors import BenchError
from scorer.evaluators.text import is_negated, strip_token
from tests.scorer.helpers import ctx, score


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("Paris", "Paris"),
        ("**Paris**.", "Paris"),
        ("`Paris`", "Paris"),
        ('"Paris."', "Paris"),
        ("```\nParis\n```", "Paris"),
        ("Paris..", "Paris."),
        ("`__init__`", "__init__"),
    ],
)
def test_strip_token(text: str, want: str) -> None:
    assert strip_token(text) == want


def test_equals_and_case() -> None:
    assert score("equals", ctx("  paris \n"), value="Paris").score == 1.0
    assert score("equals", ctx("paris"), value="Paris", case_sensitive=True).score == 0.0
    assert score("equals", ctx("Paris is it"), value="Paris").score == 0.0


def test_exact_token() -> None:
    assert score("exact_token", ctx("**42**."), value="42").score == 1.0
    assert score("exact_token", ctx("The answer: 42"), value="42").score == 0.0


def test_contains_all_gives_partial_credit() -> None:
    s = score("contains_all", ctx("apples and Pears"), values=["apples", "pears", "plums"])
    assert s.score == pytest.approx(2 / 3)
    assert "plums" in s.detail
    assert score("contains_all", ctx("apples and Pears"), values=["Pears"], case_sensitive=True).score == 1.0
    assert score("contains_all", ctx("apples and pears"), values=["Pears"], case_sensitive=True).score == 0.0


def test_contains_any_and_none() -> None:
    assert score("contains_any", ctx("a red fox"), values=["blue", "RED"]).score == 1.0
    assert score("contains_any", ctx("a red fox"), values=["blue"]).score == 0.0
    assert score("contains_none", ctx("a red fox"), values=["blue"]).score == 1.0
    assert score("contains_none", ctx("a red fox"), values=["Fox"]).score == 0.0


def test_regex() -> None:
    assert score("regex", ctx("id: AB-123"), pattern=r"[A-Z]{2}-\d+").score == 1.0
    assert score("regex", ctx("id: ab-123"), pattern=r"[A-Z]{2}-\d+").score == 0.0
    assert score("regex", ctx("id: ab-123"), pattern=r"[A-Z]{2}-\d+", ignore_case=True).score == 1.0
    with pytest.raises(BenchError, match=r"t\.one.*check 1 \(regex\).*not a valid regular expression"):
        score("regex", ctx("x"), pattern="(")


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("The capital is Paris.", True),
        ("It is not Paris.", False),
        ("It isn't Paris, it is Lyon.", False),
        ("Not Lyon. Paris is right.", True),
        ("Never Paris, but Paris on Sundays.", True),
        ("Parisian food", False),
    ],
)
def test_mentions_ignores_negated(text: str, ok: bool) -> None:
    assert score("mentions", ctx(text), value="Paris").score == (1.0 if ok else 0.0)


def test_is_negated_looks_within_the_clause() -> None:
    assert is_negated("it is not ")
    assert not is_negated("it is not Lyon; it is ")
