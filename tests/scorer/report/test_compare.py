"""bench compare: a planted regression is found, noise is not called one, runs that differ are flagged."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.cli import main
from bench.scorer.report.compare import compare
from bench.scorer.report.load import load
from tests.scorer.report.factory import exchange, meta, result, write_scores

TESTS = [f"tools.t{i:02d}" for i in range(40)]


def run(tmp_path: Path, name: str, failing: set[int], **kwargs: object) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    results = [
        result(t, "m", passed=i not in failing, category="tool_calling" if i < 20 else "chat", **kwargs)  # type: ignore[arg-type]
        for i, t in enumerate(TESTS)
    ]
    return write_scores(folder / "scores.jsonl", meta(), results)


def test_planted_regression_is_significant(tmp_path: Path) -> None:
    a = run(tmp_path, "a", set())
    b = run(tmp_path, "b", set(range(10)))  # ten tool-calling tests now fail
    c = compare(load(a), load(b))
    overall = next(d for d in c.deltas if d.scope == "overall")
    # 10 pass->fail, 0 fail->pass: p = 2 * 0.5^10 = 0.00195; 3 rows tested (overall + 2 categories): 0.05/3.
    assert (overall.regressed, overall.improved) == (10, 0)
    assert overall.p_value == pytest.approx(2 / 1024)
    assert c.threshold == pytest.approx(0.05 / 3)
    assert overall.significant and overall.verdict == "significant regression"
    assert c.significant_regression
    tools = next(d for d in c.deltas if d.group == "tool_calling")
    assert tools.significant and tools.rate_a == 1.0 and tools.rate_b == 0.5
    assert len(c.regressions) == 10 and not c.improvements
    first = c.regressions[0]
    assert first.test == "tools.t00" and first.failure_type == "wrong_args"
    assert first.commands == [f"bench cassette show {b.parent / 'run.cassette'} --id x-m-tools.t00-0"]
    assert overall.score_delta == pytest.approx(-0.25)


def test_noise_is_not_called_a_regression(tmp_path: Path) -> None:
    a = run(tmp_path, "a", {0, 1, 30})
    b = run(tmp_path, "b", {2, 3, 4, 31})  # 4 pass->fail, 3 fail->pass
    c = compare(load(a), load(b))
    overall = next(d for d in c.deltas if d.scope == "overall")
    # 4 vs 3 discordant: 2 * P(X <= 3 | Bin(7, 1/2)) = 2 * 64/128 = 1.
    assert (overall.regressed, overall.improved) == (4, 3)
    assert overall.p_value == pytest.approx(1.0)
    assert not c.significant_regression
    assert len(c.regressions) == 4 and len(c.improvements) == 3


def test_fail_on_regression_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = run(tmp_path, "a", set())
    regressed = run(tmp_path, "b", set(range(10)))
    noisy = run(tmp_path, "c", {5, 6, 7})  # 3 vs 0: p = 0.25, not significant
    assert main(["compare", str(a), str(regressed), "--fail-on-regression"]) == 1
    err = capsys.readouterr().err
    assert "significant regression: exit 1" in err and "exact McNemar" in err
    assert main(["compare", str(a), str(noisy), "--fail-on-regression"]) == 0
    assert "no significant regression" in capsys.readouterr().err
    # Without the flag the exit code never depends on the result.
    assert main(["compare", str(a), str(regressed)]) == 0


def test_compare_output_names_the_exchanges(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = run(tmp_path, "a", set())
    b = run(tmp_path, "b", {3})
    assert main(["compare", str(a.parent), str(b.parent), "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert "## Regressions (pass → fail)" in out
    assert "bench cassette show" in out and "--id x-m-tools.t03-0" in out
    assert main(["compare", str(a), str(b), "--format", "json"]) == 0
    assert '"significant_regression": false' in capsys.readouterr().out


def test_like_for_like_warnings(tmp_path: Path) -> None:
    a = run(tmp_path, "a", set())
    other = tmp_path / "b"
    other.mkdir()
    cut = [{"path": "run.cassette", "run": "r-2", "created": "x", "truncated": True, "settings": {}, "run_meta": {}}]
    results = [
        result(t, "m", settings={"temperature": 0.7, "seed": 8, "max_tokens": 256, "stream": True}, fingerprint="fp_9")
        for t in TESTS[:30]
    ]
    b_meta = meta(catalog_hash="sha256:other", scorer_version="1.1", evaluators={"contains_all": 2}, cassettes=cut)
    b = write_scores(other / "scores.jsonl", b_meta, results)
    text = "\n".join(compare(load(a), load(b)).warnings)
    assert "catalog differs" in text
    assert "scorer differs" in text
    assert "contains_all (A 1, B 2)" in text and "tool_called (A 2, B None)" in text
    assert "m: seed differs (A 7 (fixed), B 8 (fixed))" in text
    assert "sampling setting temperature differs" in text
    assert "system fingerprint differs (A fp_1, B fp_9)" in text
    assert "B is an interrupted run" in text
    assert "10 result(s) only in A" in text


def test_like_for_like_runs_have_no_warnings(tmp_path: Path) -> None:
    assert compare(load(run(tmp_path, "a", set())), load(run(tmp_path, "b", {1}))).warnings == []


def test_per_epoch_seeds_compare_by_their_base_not_by_how_many_epochs_ran(tmp_path: Path) -> None:
    def per_epoch(name: str, epochs: int, base: int) -> Path:
        (tmp_path / name).mkdir()
        lines = [
            result(t, "m", epoch=e, settings={"temperature": 0.0, "seed": base + e})
            for t in TESTS[:5]
            for e in range(epochs)
        ]
        return write_scores(tmp_path / name / "scores.jsonl", meta(), lines)

    three, five, other = per_epoch("a", 3, 7), per_epoch("b", 5, 7), per_epoch("c", 3, 9)
    # Seeds 7-9 against 7-11: the same choice (per-epoch from 7), more epochs; no warning about the seed.
    assert not [w for w in compare(load(three), load(five)).warnings if "seed" in w]
    assert "m: seed differs (A 7 (per-epoch), B 9 (per-epoch))" in compare(load(three), load(other)).warnings


def test_compare_shows_decode_speed_task_time_and_calls_per_side(tmp_path: Path) -> None:
    from bench.scorer.report.compare_sections import speed_section

    def side_file(name: str, gap_us: int, verdict: str) -> Path:
        (tmp_path / name).mkdir()
        # 11 tokens, 10 gaps: decode speed 10 / (10 * gap) per second.
        ex = {**exchange("x", ttft_us=100_000, itl_us=[gap_us] * 10), "started_us": 1, "end_us": 2_000_000}
        calls = {"made": 1, "reference": 1, "verdict": verdict, "missing": [], "extra": []}
        lines = [{**result(t, "m", exchanges=[ex]), "calls": calls} for t in TESTS[:4]]
        return write_scores(tmp_path / name / "scores.jsonl", meta(), lines)

    comparison = compare(load(side_file("a", 50_000, "same")), load(side_file("b", 25_000, "different")))
    section = speed_section(comparison)
    # A decodes at 20 tok/s, B at 40; every task took 2 s; A's calls were the reference's, B's went to other tools.
    assert section.rows == [["m", "20.0", "40.0", "2.00", "2.00", "4/0/0/0", "0/0/0/4"]]


def test_a_backend_on_another_quantization_is_a_changed_backend(tmp_path: Path) -> None:
    from bench.scorer.report import aggregate
    from bench.scorer.report.sections import server_section

    def run_on(name: str, quantization: str, version: str) -> Path:
        (tmp_path / name).mkdir()
        server = {
            "engine": "llama.cpp",
            "version": version,
            "sources": ["GET /props"],
            "models": [
                {"id": "m", "context_length": 8192, "quantization": quantization, "file": f"m-{quantization}.gguf"}
            ],
        }
        cassettes = [{"path": "run.cassette", "run": "r-1", "settings": {}, "run_meta": {}, "server": server}]
        lines = [result(t, "m") for t in TESTS[:3]]
        return write_scores(tmp_path / name / "scores.jsonl", meta(cassettes=cassettes), lines)

    a, b, same = run_on("a", "Q4_K_M", "b4567"), run_on("b", "Q8_0", "b4567"), run_on("c", "Q4_K_M", "b4567")
    warnings = compare(load(a), load(b)).warnings
    # The same model name, fingerprint and settings on both sides: only the server's own description tells them apart.
    assert (
        "m: the backend changed between runs (file m-Q4_K_M.gguf -> m-Q8_0.gguf; quantization Q4_K_M -> Q8_0)"
        in warnings
    )
    assert not [w for w in compare(load(a), load(same)).warnings if "backend" in w]
    rows = server_section(aggregate.build(load(b))).rows
    assert rows == [["m", "llama.cpp b4567", "8192", "–", "Q8_0", "–", "–", "m-Q8_0.gguf", "run.cassette"]]
    # A server that described nothing (a hosted API, the simulator): no row of dashes.
    (tmp_path / "d").mkdir()
    bare = [{"path": "r.cassette", "run": "r-1", "settings": {}, "run_meta": {}, "server": {"models": [{"id": "m"}]}}]
    quiet = write_scores(tmp_path / "d" / "scores.jsonl", meta(cassettes=bare), [result(TESTS[0], "m")])
    assert server_section(aggregate.build(load(quiet))).rows == []
