"""rescore() over cassettes written with the real CassetteWriter: grouping, stale, damage, determinism, flips."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import msgpack
import msgspec
import pytest
import zstandard

from bench.catalog.model import Check
from bench.core.cassette import CassetteWriter
from bench.core.cassette.records import Settings
from bench.core.errors import BenchError
from bench.scorer.flips import find_flips
from bench.scorer.results import Result
from bench.scorer.scores_io import read_scores, write_scores
from tests.scorer.helpers import (
    CAPITAL,
    CATALOG,
    HASHES,
    WEATHER,
    make_catalog,
    record,
    spec,
    write_cassette,
)
from tests.support.damage import cut_into_last_frame
from tests.support.rescored import rescored as rescore


def records() -> list[dict[str, Any]]:
    out = []
    for model in ("m1", "m2"):
        for epoch in range(3):
            good = model == "m1" or epoch == 0
            out.append(record("t.capital", "**Paris**." if good else "Lyon", model=model, epoch=epoch))
            out.append(
                record(
                    "t.weather",
                    calls=[("get_weather", {"city": "Paris" if good else "Rome"})],
                    model=model,
                    epoch=epoch,
                )
            )
    return out


@pytest.fixture
def cassettes(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    write_cassette(folder / "a.cassette", records()[:6], tests=HASHES)
    write_cassette(folder / "b.cassette", records()[6:], tests=HASHES)
    return folder


def by_key(results: list[Result]) -> dict[tuple[str, str, int], Result]:
    return {(r.model, r.test, r.epoch): r for r in results}


def test_scores_every_result(cassettes: Path) -> None:
    meta, results = rescore([cassettes], catalog=CATALOG)
    assert len(results) == 12 and {r.status for r in results} == {"scored"}
    res = by_key(results)
    assert res[("m1", "t.capital", 2)].passed is True
    assert res[("m2", "t.capital", 1)].failure_type == "outcome_mismatch"
    assert res[("m2", "t.weather", 2)].failure_type == "wrong_args"
    assert [(r.model, r.test, r.epoch) for r in results] == sorted(res)
    assert meta.catalog_hash == "cat" and len(meta.cassettes) == 2 and meta.warnings == []
    first = results[0]
    assert first.cassette == "a.cassette" and first.run == "r1"
    assert first.exchanges[0].final is True and first.exchanges[0].ttft_us is not None
    assert first.settings["stream"] is True


def test_retries_use_the_final_attempt(tmp_path: Path) -> None:
    recs = [
        record("t.capital", "Lyon", attempt=1, id="x1", outcome="timeout", status=None),
        record("t.capital", "Paris", attempt=2, id="x2"),
    ]
    write_cassette(tmp_path / "r.cassette", recs, tests=HASHES)
    _, [result] = rescore([tmp_path], catalog=CATALOG)
    assert result.passed is True and result.attempts == 2 and result.retries == 1
    assert [(e.attempt, e.final) for e in result.exchanges] == [(1, False), (2, True)]


def test_filters(cassettes: Path) -> None:
    _, results = rescore([cassettes], catalog=CATALOG, models=["m2"], suites=["t"])
    assert {r.model for r in results} == {"m2"} and len(results) == 6
    with pytest.raises(BenchError, match=r"2 cassette\(s\) read, no exchange in them matches --suite/--model$"):
        rescore([cassettes], catalog=CATALOG, suites=["other"])


def test_stale_and_unknown_tests(tmp_path: Path) -> None:
    recs = [record("t.capital", "Paris"), record("t.weather", "x"), record("t.gone", "x")]
    write_cassette(tmp_path / "s.cassette", recs, tests={"t.capital": "OLD", "t.weather": "hw"})
    meta, results = rescore([tmp_path], catalog=CATALOG)
    res = {r.test: r for r in results}
    assert res["t.capital"].status == "stale" and res["t.capital"].score is None
    assert res["t.capital"].test_hash == "OLD" and res["t.capital"].catalog_test_hash == "hc"
    assert res["t.weather"].status == "scored"
    assert res["t.gone"].status == "unknown"
    assert any("'t.capital' changed since it was recorded" in w for w in meta.warnings)
    assert any("unknown test id 't.gone'" in w for w in meta.warnings)


def test_no_recorded_hashes_says_so(tmp_path: Path) -> None:
    write_cassette(tmp_path / "n.cassette", [record("t.capital", "Paris")], tests=None)
    meta, [result] = rescore([tmp_path], catalog=CATALOG)
    assert result.status == "scored"
    assert any("staleness not checked" in w for w in meta.warnings)


def test_damaged_cassettes_do_not_stop_the_rest(tmp_path: Path) -> None:
    write_cassette(tmp_path / "good.cassette", [record("t.capital", "Paris")], tests=HASHES)
    (tmp_path / "corrupt.cassette").write_bytes(b"\x28\xb5\x2f\xfd" + b"garbage" * 20)
    (tmp_path / "foreign.cassette").write_bytes(b"hello")
    cut = tmp_path / "cut.cassette"
    write_cassette(cut, [record("t.weather", calls=[("get_weather", {"city": "Paris"})], run="r2")], tests=HASHES)
    cut.write_bytes(cut_into_last_frame(cut.read_bytes(), 20))
    header = {"kind": "header", "format": "bench-cassette", "version": 99}
    (tmp_path / "future.cassette").write_bytes(zstandard.ZstdCompressor().compress(msgpack.packb(header)))
    meta, results = rescore([tmp_path], catalog=CATALOG)
    assert {r.test for r in results} == {"t.capital", "t.weather"}
    text = "\n".join(meta.warnings)
    assert "future.cassette: format version 99 is newer" in text and "upgrade bench" in text
    assert "foreign.cassette: not a bench cassette" in text
    assert "corrupt.cassette" in text and "cut.cassette: read 1 exchange(s); no end record" in text
    assert all("\n" not in w for w in meta.warnings)


def test_deterministic_across_runs_and_jobs(cassettes: Path, tmp_path: Path) -> None:
    outs = []
    for i, jobs in enumerate((1, 2, 2)):
        meta, results = rescore([cassettes], catalog=CATALOG, jobs=jobs)
        out = tmp_path / f"scores{i}.jsonl"
        write_scores(out, meta, results)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] == outs[2]
    meta, results = read_scores(tmp_path / "scores0.jsonl")
    assert len(results) == 12 and meta.format == "bench-scores"


def test_sharded_large_cassette_matches_unsharded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.scorer import units

    recs = [record("t.capital", "Paris" if i % 3 else "Rome", model=f"m{i % 4}", epoch=i) for i in range(40)]
    write_cassette(tmp_path / "big.cassette", recs, tests=HASHES)
    monkeypatch.setattr(units, "SHARD_MIN_BYTES", 0)
    assert len(units.plan_units([tmp_path / "big.cassette"], 2)) == 2
    assert rescore([tmp_path], catalog=CATALOG, jobs=1) == rescore([tmp_path], catalog=CATALOG, jobs=2)


def test_changing_one_argument_flips_exactly_the_affected_results(cassettes: Path) -> None:
    old_meta, old = rescore([cassettes], catalog=CATALOG)
    # m2 answered "Rome" in epochs 1 and 2: accepting Rome flips exactly those two weather results.
    changed = dataclasses.replace(
        WEATHER, checks=(Check("tool_args", {"name": "get_weather", "args": {"city": {"one_of": ["Paris", "Rome"]}}}),)
    )
    new_meta, new = rescore([cassettes], catalog=make_catalog(CAPITAL, changed))
    flips = find_flips(old_meta, old, new_meta, new)
    assert sorted((f.model, f.test, f.epoch) for f in flips) == [("m2", "t.weather", 1), ("m2", "t.weather", 2)]
    assert all(
        f.old_passed is False and f.new_passed is True and f.old_score == 0.0 and f.new_score == 1.0 for f in flips
    )
    assert all(f.cause == "tool_args arguments changed" for f in flips)


def test_flip_cause_names_versions(cassettes: Path) -> None:
    meta, results = rescore([cassettes], catalog=CATALOG)
    old_results = [msgspec.structs.replace(r) for r in results]
    target = next(r for r in old_results if r.model == "m1" and r.test == "t.capital")
    target.passed, target.score = False, 0.0
    target.checks = [msgspec.structs.replace(target.checks[0], version=0)]
    old_meta = msgspec.structs.replace(meta, parser_version=meta.parser_version - 1)
    [flip] = find_flips(old_meta, old_results, meta, results)
    assert "evaluator exact_token v0→v1" in flip.cause and "parser v" in flip.cause


def test_budgets_cut_streams(tmp_path: Path) -> None:
    write_cassette(tmp_path / "b.cassette", [record("t.capital", "The answer is Paris")], tests=HASHES)
    check = spec([Check("contains_all", {"values": ["Paris"]})], id="t.capital", hash="hc")
    catalog = make_catalog(check)
    _, [full] = rescore([tmp_path], catalog=catalog)
    meta, [cut] = rescore([tmp_path], catalog=catalog, max_tokens=2)
    assert full.passed is True and cut.passed is False
    assert "budget_max_tokens" in cut.findings and meta.budgets.max_tokens == 2
    _, [late] = rescore([tmp_path], catalog=catalog, deadline_s=0.0025)
    assert late.status == "errored" and late.failure_type == "timeout"


def test_a_job_recorded_again_by_a_resumed_run_is_scored_once_from_the_latest_cassette(tmp_path: Path) -> None:
    # The first session was cut during the weather job's first answer; `--resume` recorded that job again, whole.
    write_cassette(tmp_path / "a.cassette", [record("t.capital", "Paris"), record("t.weather", "Let me")], tests=HASHES)
    resumed = [record("t.weather", calls=[("get_weather", {"city": "Paris"})])]
    write_cassette(tmp_path / "b.cassette", resumed, tests=HASHES)
    meta, results = rescore([tmp_path], catalog=CATALOG)
    assert [(r.test, r.cassette, r.passed) for r in results] == [
        ("t.capital", "a.cassette", True),
        ("t.weather", "b.cassette", True),
    ]
    assert meta.warnings == [
        "run 'r1': 1 job(s) recorded in more than one cassette (a resumed run records a job cut off mid-way again, "
        "whole); scored each one's latest recording only"
    ]
    # Results without a run id are other clients' traffic: nothing is dropped.
    for path, content in (("c.cassette", "Paris"), ("d.cassette", "Lyon")):
        with CassetteWriter(tmp_path / "norun" / path, settings=Settings(mode="record")) as w:
            w.put(record("t.capital", content, run=""))
    _, results = rescore([tmp_path / "norun"], catalog=CATALOG)
    assert len(results) == 2


def test_itls_reach_the_scores_file_exactly_even_past_int32(tmp_path: Path) -> None:
    rec = record("t.capital", "Paris")
    gaps = rec.response.chunk_us
    gaps[2] = 3_000_000_000  # a 50-minute stall between two events does not fit in 32 bits
    write_cassette(tmp_path / "s.cassette", [rec], tests=HASHES)
    meta, [result] = rescore([tmp_path], catalog=CATALOG)
    write_scores(tmp_path / "scores.jsonl", meta, [result])
    _, [back] = read_scores(tmp_path / "scores.jsonl")
    itl = back.exchanges[0].itl_us
    assert 3_000_000_000 in itl and itl == list(result.exchanges[0].itl_us)
