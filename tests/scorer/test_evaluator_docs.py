"""The evaluator tables in docs/ are generated from the evaluators' signatures and must agree with them."""

from __future__ import annotations

from bench.scorer import evaluator_docs
from bench.scorer.registry import EVALUATORS, EvalContext, Evaluator, Score, evaluator
from bench.scorer.signature import Strings


def test_docs_tables_match_the_signatures() -> None:
    for name in evaluator_docs.FILES:
        text = (evaluator_docs.DOCS / name).read_text(encoding="utf-8")
        assert "<!-- generated: " in text, f"docs/{name} lost its generated tables"
        assert evaluator_docs.regenerate(text) == text, (
            f"docs/{name} is stale: run python -m bench.scorer.evaluator_docs"
        )
    assert evaluator_docs.undocumented((evaluator_docs.DOCS / "scorer.md").read_text(encoding="utf-8")) == []
    assert evaluator_docs.main(["--check"]) == 0


def test_a_new_evaluator_shows_up_in_the_tables() -> None:
    @evaluator()
    def _test_docs(ctx: EvalContext, *, words: Strings, strict: bool = True, label: str | None = None) -> Score:
        """every word is present"""
        return Score(1.0)

    try:
        ev: Evaluator = EVALUATORS["_test_docs"]
        page = "<!-- generated: evaluators test_evaluator_docs -->\nold\n<!-- end generated -->\n"
        assert evaluator_docs.regenerate(page).splitlines()[3] == (
            "| `_test_docs` | `words`, `strict: true`, `label?` | every word is present |"
        )
        page = "<!-- generated: arguments test_evaluator_docs -->\n<!-- end generated -->\n"
        row = evaluator_docs.regenerate(page).splitlines()[3]
        assert "`words`: non-empty list of strings; `strict`: boolean = `true`; `label?`: string" in row
        assert evaluator_docs.undocumented(page) == sorted(EVALUATORS)  # an arguments table documents nothing
        assert ev.group == "test_evaluator_docs"
    finally:
        del EVALUATORS["_test_docs"]
