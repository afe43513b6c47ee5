"""Aggregation of a small scores file whose every count is known."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.scorer.report import aggregate
from bench.scorer.report.load import load
from bench.scorer.report.stats import wilson
from tests.scorer.report.factory import meta, result, write_scores


def scores_file(tmp_path: Path) -> Path:
    results = [
        result("tools.a", "m1", passed=True, category="tool_calling"),
        result("tools.b", "m1", passed=False, category="tool_calling", failure_type="wrong_args"),
        result("tools.c", "m1", status="errored", failure_type="timeout", category="tool_calling"),
        result("json.d", "m1", status="skipped", category="structured"),
        result("json.e", "m1", status="stale", category="structured"),
        result("json.f", "m1", passed=True, category="structured"),
        # Five epochs of one test, two passing: flaky, pass@2 = 0.7, pass^2 = 0.1 (see test_stats).
        *(result("chat.g", "m2", passed=e < 2, epoch=e, category="chat", failure_type="no_call") for e in range(5)),
    ]
    return write_scores(tmp_path / "scores.jsonl", meta(), results)


def test_counts_and_wilson_per_group(tmp_path: Path) -> None:
    report = aggregate.build(load(scores_file(tmp_path)))
    overall = {r.model: r for r in report.rates if r.scope == "overall"}
    m1 = overall["m1"]
    # Scored: a (pass), b (fail), f (pass); errored, skipped and stale results stay out of the rate.
    assert (m1.counts.scored, m1.counts.passed, m1.counts.errored, m1.counts.skipped, m1.counts.stale) == (
        3,
        2,
        1,
        1,
        1,
    )
    assert m1.pass_rate == pytest.approx(2 / 3)
    assert (m1.low, m1.high) == wilson(2, 3)
    tools = next(r for r in report.rates if r.model == "m1" and r.scope == "category" and r.group == "tool_calling")
    assert (tools.counts.passed, tools.counts.scored, tools.counts.errored) == (1, 2, 1)
    suites = {r.group for r in report.rates if r.model == "m1" and r.scope == "suite"}
    assert suites == {"tools", "json"}


def test_epochs_flaky_and_failures(tmp_path: Path) -> None:
    report = aggregate.build(load(scores_file(tmp_path)))
    rows = {(e.model, e.k): e for e in report.epochs}
    assert rows[("m2", 2)].pass_at_k == pytest.approx(0.7)
    assert rows[("m2", 2)].pass_hat_k == pytest.approx(0.1)
    assert rows[("m2", 5)].pass_hat_k == 0.0
    assert ("m1", 2) not in rows  # one epoch per test: no pass@k beyond the plain rate
    assert [(f.model, f.test, f.passed, f.scored) for f in report.flaky] == [("m2", "chat.g", 2, 5)]
    assert report.failures["m1"] == {"timeout": 1, "wrong_args": 1}
    assert report.failures["m2"] == {"no_call": 3}


def test_settings_and_warnings(tmp_path: Path) -> None:
    cassettes = [
        {"path": "a.cassette", "run": "r-1", "created": "x", "truncated": True, "settings": {}, "run_meta": {}},
        {
            "path": "b.cassette",
            "run": "r-1",
            "created": "x",
            "truncated": False,
            "settings": {},
            "run_meta": {"catalog_hash": "old"},
        },
    ]
    results = [
        result("t.a", "m", fingerprint="fp_1", settings={"temperature": 0.0, "seed": 7}),
        result("t.b", "m", fingerprint="fp_2", settings={"temperature": 0.7, "seed": 7}, served_model="m-2024"),
        result("t.c", "m", status="stale"),
    ]
    path = write_scores(tmp_path / "s.jsonl", meta(cassettes=cassettes), results)
    report = aggregate.build(load(path))
    s = report.settings[0]
    assert s.served_models == ["m-2024", "m-served"]
    assert s.system_fingerprints == ["fp_1", "fp_2"]
    assert s.settings["temperature"] == ["0.0", "0.7"]
    text = "\n".join(report.warnings)
    assert "system fingerprint changed during run r-1 (fp_1, fp_2)" in text
    assert "temperature varied" in text
    assert "a.cassette was cut short" in text
    assert "catalog changed since recording (recorded old" in text
    assert "1 stale result" in text
    assert report.run.bench_version == "0.1.0" and report.run.scorer_version == "1.0"


def test_one_fingerprint_gives_no_warning(tmp_path: Path) -> None:
    report = aggregate.build(load(scores_file(tmp_path)))
    assert not any("fingerprint" in w for w in report.warnings)


@pytest.mark.parametrize(
    ("seeds", "mode", "base", "warned"),
    [
        ([7, 8, 9], "per-epoch", 7, False),  # bench record's per-epoch seeds: seed + epoch, by design
        ([7, 7, 7], "fixed", 7, False),  # --seed 7: one seed for every epoch
        ([7, 3, 9], "varied", None, True),  # neither: a setting that changed within the run
    ],
)
def test_per_epoch_seeds_are_not_a_varied_setting(
    tmp_path: Path, seeds: list[int], mode: str, base: int | None, warned: bool
) -> None:
    results = [
        result("t.a", "m", epoch=epoch, settings={"temperature": 0.0, "seed": seed}) for epoch, seed in enumerate(seeds)
    ]
    report = aggregate.build(load(write_scores(tmp_path / "s.jsonl", meta(), results)))
    s = report.settings[0]
    assert (s.seed_mode, s.seed_base) == (mode, base)
    assert any("seed varied" in w for w in report.warnings) is warned


def test_tool_calls_are_counted_against_the_reference(tmp_path: Path) -> None:
    def calls(made: int, reference: int, verdict: str) -> dict[str, object]:
        return {"made": made, "reference": reference, "verdict": verdict, "missing": [], "extra": []}

    lines = [
        {**result("t.a", "m"), "calls": calls(3, 3, "same")},
        {**result("t.b", "m"), "calls": calls(5, 3, "more")},
        {**result("t.c", "m", passed=False), "calls": calls(0, 1, "fewer")},
        {**result("t.d", "m", passed=False), "calls": calls(1, 1, "different")},
        result("t.e", "m"),  # no tools offered: not counted
    ]
    report = aggregate.build(load(write_scores(tmp_path / "s.jsonl", meta(), lines)))
    [row] = report.calls
    assert (row.results, row.same, row.more, row.fewer, row.different) == (4, 1, 1, 1, 1)
    assert (row.made, row.reference) == (9, 8)
    from bench.scorer.report.sections import calls_section

    # 9 calls over 4 results against the references' 8.
    assert calls_section(report).rows == [["m", "4", "1", "1", "1", "1", "2.25", "2.00"]]
