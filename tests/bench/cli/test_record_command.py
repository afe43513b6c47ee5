"""`bench record` as a real process: the flags that choose where requests go and which API they use."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from bench.catalog.sim import start_sim
from bench.core.cassette import CassetteReader, find_cassettes
from bench.proxy import start_proxy
from bench.scorer.checked_catalog import load_catalog

ROOT = Path(__file__).resolve().parents[3]


async def test_proxy_and_api_flags_send_through_a_running_proxy_to_the_responses_api(tmp_path: Path) -> None:
    test = "tools.weather_paris"
    async with await start_sim(catalog=load_catalog(None)) as sim:
        proxy = await start_proxy(upstream=sim.url, cassettes=tmp_path / "proxy")
        try:
            out = tmp_path / "out"
            flags = ("--proxy", proxy.url, "--api", "responses", "--tests", test, "--model", "oracle", "--quiet")
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bench", "record", *flags, "--out", str(out), cwd=ROOT,
                env={**os.environ, "BENCH_API_KEY": "sk-record-test"},
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            stdout, stderr = await asyncio.wait_for(proc.communicate(), 120)
            assert proc.returncode == 0, stderr.decode()
            assert "1/1 jobs" in stdout.decode()
        finally:
            await proxy.close()
    # --proxy: the running proxy recorded the exchange; no proxy of the recorder's own wrote a cassette.
    assert not (find_cassettes([out]) if out.exists() else [])
    assert proxy.cassette_path is not None
    reader = CassetteReader(proxy.cassette_path)
    exchanges = list(reader)
    # That proxy's cassette has no run metadata in its header; the X-Bench-* tags are there.
    assert reader.header.run.id is None and reader.header.run.tests is None
    [exchange] = [e for e in exchanges if e.tags.get("test")]  # the rest: the gateway check's
    # --api responses: the catalog test went to /v1/responses, as a Responses API request.
    assert exchange.request.path == "/v1/responses" and exchange.response.status == 200
    assert exchange.tags["test"] == test and b'"input"' in exchange.request.body


async def _record(tmp_path: Path, *flags: str) -> tuple[int, str, str]:
    async with await start_sim(catalog=load_catalog(None), ttft_ms=0, tokens_per_second=2000) as sim:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench", "record", "--upstream", sim.url, "--quiet", *flags, cwd=tmp_path,
            env={**os.environ, "BENCH_API_KEY": "sk-record-test"},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        stdout, stderr = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode or 0, stdout.decode(), stderr.decode()


async def test_a_model_given_twice_is_recorded_once_with_a_warning_and_reports_no_false_retries(
    tmp_path: Path,
) -> None:
    from bench.cli import main

    tests = "tools.capital_no_tool,tools.weather_paris"
    rc, out, err = await _record(tmp_path, "--model", "oracle", "--model", "oracle", "--tests", tests, "--out", "c")
    assert rc == 0, err
    assert err.strip() == (
        "bench record: warning: --model oracle given more than once: recorded once (--epochs N repeats each test)"
    )
    assert "2/2 jobs, 2 requests (0 retries" in out
    (cassette,) = find_cassettes([tmp_path / "c"])
    assert sorted(e.tags["test"] for e in CassetteReader(cassette) if e.tags.get("test")) == tests.split(",")
    assert main(["rescore", str(tmp_path / "c"), "--jobs", "1"]) == 0
    report = tmp_path / "r.json"
    assert main(["report", str(tmp_path / "c" / "scores.jsonl"), "--format", "json", "--out", str(report)]) == 0
    import orjson

    (row,) = orjson.loads(report.read_bytes())["reliability"]
    assert (row["results"], row["attempts"], row["retries"], row["results_retried"]) == (2, 2, 0, 0)


async def test_a_model_listed_twice_in_bench_yaml_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "bench.yaml").write_text("models: [oracle, m2, oracle]\n")
    rc, out, err = await _record(tmp_path, "--config", "bench.yaml", "--tests", "tools.capital_no_tool")
    assert rc == 1 and not out
    assert err.strip() == (
        "bench: error: bench.yaml: field 'models': lists oracle more than once; list each model once "
        "(epochs: N repeats every test)"
    )
    assert not (tmp_path / "cassettes").exists()


async def test_a_stream_ended_by_the_idle_timeout_is_recorded_and_reported_as_a_timeout(tmp_path: Path) -> None:
    """The simulated model stalls mid-stream until the client gives up: the driver's idle_timeout (1 s) ends it,
    and the cassette, the scores and the report say timeout, not client_disconnect."""
    from bench.cli import main

    (tmp_path / "bench.yaml").write_text("idle_timeout: 1\nmax_retries: 0\n")
    flags = ("--config", "bench.yaml", "--model", "oracle+stall!", "--tests", "tools.capital_no_tool", "--out", "c")
    rc, _, err = await _record(tmp_path, *flags)
    assert rc == 0, err
    (cassette,) = find_cassettes([tmp_path / "c"])
    (record,) = [e for e in CassetteReader(cassette) if e.tags.get("test")]
    assert (record.outcome, record.error) == ("timeout", "stream silent for 1 s: the client's idle timeout ended it")
    assert main(["rescore", str(tmp_path / "c"), "--jobs", "1"]) == 0
    import orjson

    lines = [orjson.loads(line) for line in (tmp_path / "c" / "scores.jsonl").read_bytes().splitlines()]
    (result,) = [line for line in lines if line["kind"] == "result"]
    assert (result["status"], result["failure_type"]) == ("errored", "timeout")


async def _record_into(out: Path, sim_url: str, *flags: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench", "record", "--upstream", sim_url, "--model", "oracle", "--quiet",
        "--out", str(out), *flags, cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    stdout, stderr = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, stderr.decode()
    return stdout.decode()


def _sent(out: Path) -> list[tuple[str, int, int]]:
    """(test, epoch, seed) of every catalog request recorded in the folder."""
    import orjson

    rows = []
    for path in find_cassettes([out]):
        for ex in CassetteReader(path):
            if ex.tags.get("test"):
                rows.append((ex.tags["test"], int(ex.tags["epoch"]), orjson.loads(ex.request.body)["seed"]))
    return sorted(rows)


async def test_category_selects_the_run_and_the_two_seed_modes_send_what_they_say(tmp_path: Path) -> None:
    catalog = load_catalog(None)
    wanted = sorted(t.id for t in catalog.tests.values() if t.category == "extraction" and t.suite == "extract")
    assert wanted  # the filter has something to select, and the rest of the catalog to leave out
    async with await start_sim(catalog=catalog) as sim:
        fixed = await _record_into(
            tmp_path / "fixed", sim.url, "--category", "extraction", "--epochs", "3", "--seed", "5"
        )
        per_epoch = await _record_into(
            tmp_path / "per", sim.url, "--category", "extraction", "--suite", "extract", "--epochs", "2",
            "--seed-per-epoch", "5",
        )  # fmt: skip
    assert f"{3 * len(wanted)}/{3 * len(wanted)} jobs" in fixed and f"{2 * len(wanted)}/" in per_epoch
    # --seed: one seed for every request of every epoch (the determinism study).
    assert _sent(tmp_path / "fixed") == sorted((t, e, 5) for t in wanted for e in range(3))
    # --seed-per-epoch: epoch e sends seed + e.
    assert _sent(tmp_path / "per") == sorted((t, e, 5 + e) for t in wanted for e in range(2))
