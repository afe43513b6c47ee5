"""Promises of docs/rules.md that no other test held: a rule's default category and its `rules` suite, epochs in
cassette order per model, untagged only unless `tagged: true`, and `test_hash` changing with the rule itself."""

from __future__ import annotations

from pathlib import Path

from bench.core.cassette.records import Exchange
from bench.scorer.rules import load_rules
from bench.scorer.synth import exchange_record, sse_chunks
from tests.scorer.helpers import write_cassette
from tests.support.rescored import rescored as rescore

RULES = """
rules:
  - id: say.hello
    match: {request: "(?i)hello"}
    checks: [{evaluator: contains_all, args: {values: [hello]}}]
  - id: say.hello.tagged
    category: greetings
    match: {request: "(?i)hello", tagged: true}
    checks: [{evaluator: contains_all, args: {values: [hello]}}]
"""


def untagged(text: str, answer: str, model: str, n: int) -> Exchange:
    request = {"model": model, "stream": True, "messages": [{"role": "user", "content": text}]}
    return exchange_record(sse_chunks(answer), id=f"x{n}", tags={}, request=request)


def test_rule_results_category_suite_epochs_and_tagged(tmp_path: Path) -> None:
    records = [
        untagged("Hello there", "hello back", "m1", 1),
        untagged("Say hello", "no greeting", "m1", 2),
        untagged("HELLO?", "hello", "m2", 3),
        untagged("Goodbye", "bye", "m1", 4),  # selected by no rule
        exchange_record(
            sse_chunks("hello"),
            id="x5",
            tags={"run": "r1", "test": "other.test", "model": "m1", "epoch": "0", "turn": "0", "attempt": "1"},
            request={"model": "m1", "stream": True, "messages": [{"role": "user", "content": "hello tagged"}]},
        ),
    ]
    cassette = write_cassette(tmp_path / "a.cassette", records)
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(RULES)
    _, results = rescore([cassette], rules=load_rules(rules_file), jobs=1)
    plain = [(r.model, r.epoch, r.passed, r.suite, r.category) for r in results if r.test == "say.hello"]
    assert plain == [
        ("m1", 0, True, "rules", "rules"),
        ("m1", 1, False, "rules", "rules"),
        ("m2", 0, True, "rules", "rules"),
    ]
    # `tagged: true` also selects the tagged exchange; the rule's own category is used.
    tagged = [(r.model, r.epoch, r.category) for r in results if r.test == "say.hello.tagged"]
    assert sorted(tagged) == [
        ("m1", 0, "greetings"),
        ("m1", 1, "greetings"),
        ("m1", 2, "greetings"),
        ("m2", 0, "greetings"),
    ]
    # A changed rule is a different rule: its test_hash changes; the untouched rule's does not.
    before = {r.test: r.test_hash for r in results if r.test.startswith("say.")}
    rules_file.write_text(RULES.replace("values: [hello]}}]\n  - id", "values: [hello, back]}}]\n  - id", 1))
    _, again = rescore([cassette], rules=load_rules(rules_file), jobs=1)
    after = {r.test: r.test_hash for r in again if r.test.startswith("say.")}
    assert after["say.hello"] != before["say.hello"] and after["say.hello.tagged"] == before["say.hello.tagged"]
