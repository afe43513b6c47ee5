from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.core.errors import BenchError
from bench.scorer.evaluators.text import (
    _NEGATIONS,
    _WORDS_TAIL,
    is_negated,
    last_clause,
    short,
    strip_token,
    whole_word,
)
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
        ("It isn’t Paris.", False),  # a typographic apostrophe negates as the plain one does
        ("We don’t think Paris.", False),
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


_PIECES = [*"ab .;:!?,\n\u00e9_", "but", "However", "BUT", "rebut", "however", "butter"]


@given(st.lists(st.sampled_from(_PIECES), max_size=30).map("".join))
def test_the_last_clause_is_what_follows_the_last_clause_break(text: str) -> None:
    # The plain definition: split at every break, keep the last piece.
    assert last_clause(text) == re.split(r"[.;:!?,\n]|\bbut\b|\bhowever\b", text, flags=re.IGNORECASE)[-1]


_NEGATING = [*_PIECES, "not ", "isn't ", "isn’t ", "x" * 300, " Paris", "ſ", "İ", "ÉTÉ"]


@given(st.lists(st.sampled_from(_NEGATING), max_size=40).map("".join))
def test_negation_reads_the_last_four_words_of_the_last_clause(prefix: str) -> None:
    clause = re.split(r"[.;:!?,\n]|\bbut\b|\bhowever\b", prefix, flags=re.IGNORECASE)[-1]
    words = re.findall(r"[\w']+", clause.casefold().replace("’", "'"))[-4:]
    assert is_negated(prefix) == any(w in _NEGATIONS or w.endswith("n't") for w in words)


def test_a_tagged_fence_and_bare_decoration() -> None:
    assert strip_token("```text\nParis\n```") == "Paris"
    assert strip_token('""') == "" and strip_token("**") == ""  # two decoration marks wrap nothing


def test_details_are_short_one_line_quotes() -> None:
    assert short("a\nb") == "'a b'"
    assert short("x" * 60) == repr("x" * 60)
    assert short("x" * 61) == repr("x" * 59 + "…")
    detail = score("equals", ctx("y" * 100), value="z").detail
    assert detail == f"{'y' * 59 + '…'!r} != 'z'"


def test_contains_any_and_none_honour_case_sensitive() -> None:
    assert score("contains_any", ctx("PARIS"), values=["paris"], case_sensitive=True).score == 0.0
    assert score("contains_any", ctx("PARIS"), values=["paris"]).score == 1.0
    assert score("contains_none", ctx("PARIS"), values=["paris"], case_sensitive=True).score == 1.0
    assert score("contains_none", ctx("paris"), values=["PARIS"], case_sensitive=True).score == 1.0


def test_a_negation_five_words_back_does_not_count() -> None:
    assert is_negated("not one two three four ") is False
    assert is_negated("not one two three ") is True
    # A long clause is read from its last 256 characters; a word the cut splits is read whole again ("knot" is not
    # "not"), when four or fewer words are left.
    cut = "not" + " " * (_WORDS_TAIL - 9) + "b c d "
    assert len(cut) == _WORDS_TAIL
    assert is_negated("x y z k" + cut) is False
    assert is_negated("x y z " + cut) is True


# Letters the regex engine folds together without ignoring case alike in str.lower (dotless i, long s, Kelvin sign).
_MENTION_TEXT = st.text(alphabet="aAbBiIıſsSKk _-.\n1é'", max_size=40)


@given(value=st.text(alphabet="aAbBiIsSk1é-", min_size=1, max_size=4), text=_MENTION_TEXT)
def test_a_whole_word_matches_where_the_plain_look_behind_pattern_does(value: str, text: str) -> None:
    plain = re.compile(r"(?<!\w)" + re.escape(value) + r"(?!\w)", re.IGNORECASE)
    assert [m.span() for m in whole_word(value).finditer(text)] == [m.span() for m in plain.finditer(text)]
