"""Exchanges scored per second by `bench rescore` for typical ~300-token streams with text and tool evaluators.

Builds a synthetic cassette of N exchanges (SSE chunks of ~237 B, as a real small model streams them; half plain
answers, half tool calls), then times bench.scorer.rescore.rescore with one job and with all cores, side by side in
one run, best of `--rounds`. Also times bench.core.parse alone over the same records to show where the time goes.

Then untagged traffic, as agents and other clients send it: the same answers without X-Bench-* tags, once as Chat
Completions streams and once as Responses API event streams (`event:` + `data:` lines, sequence numbers, item ids,
as OpenAI sends them), rescored with one job in interleaved rounds (CPU time): exchanges/s/core for each API and
their ratio. Untagged exchanges are parsed and written as traffic lines, not scored.

Side by side with other trees: `--baseline TREE` (repeatable; e.g. /work/base, today's main before the namespace
move, or a checkout of 750db77, before format v2) runs benchmarks/rescore_tree.py for this tree and each baseline in
interleaved rounds of their own processes (random order each round) and prints exchanges/s per core (CPU time) for
read only, read + parse, the first rescore (into an empty parse cache where the tree has one), the second with one
check changed (reading the parses) and untagged chat / Responses traffic: best and median of the rounds, and each
baseline's figure over this tree's.

    .venv/bin/python benchmarks/rescore_speed.py [--exchanges 4000] [--rounds 3] [--memory] [--baseline TREE ...]
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import string
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.catalog.model import Catalog, Check, TestSpec  # noqa: E402
from bench.core.cassette import CassetteReader, CassetteWriter  # noqa: E402
from bench.core.cassette.records import RunMeta  # noqa: E402
from bench.core.parse import parse_exchange  # noqa: E402
from bench.scorer.rescore import Request, rescore  # noqa: E402
from bench.scorer.synth import exchange_record  # noqa: E402
from tests.support.rescored import rescored  # noqa: E402

TOKENS = 300
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
# Pseudo-words of 2-9 letters: text that compresses about as well as a real model's (the shipped SmolLM2 cassette
# is 24x smaller than its raw bytes), so reading costs what it costs on real recordings.
VOCAB = ["".join(random.Random(w).choices(string.ascii_lowercase, k=2 + w % 8)) for w in range(4000)]


def chunk(
    rng_id: str, created: int, delta: dict[str, Any], finish: str | None = None, noise: random.Random | None = None
) -> bytes:
    # Laid out like real servers' chunks (one id and timestamp per stream, model, fingerprint).
    obj = {
        "id": rng_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": "SmolLM2-135M-Instruct-Q8_0",
        "system_fingerprint": "b4132-3c1f0e2d",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    if noise is not None:  # as OpenAI sends chunks: `usage` in each, then random characters
        obj.update(usage=None, obfuscation=obfuscation(noise))
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def obfuscation(noise: random.Random | None, constant: str = "") -> str:
    """OpenAI's `obfuscation` on every streamed delta event: 1-15 random alphanumerics ("to normalize payload
    sizes"); `constant` without `noise` (today's Responses traffic: the same characters in every event)."""
    if noise is None:
        return constant
    return "".join(noise.choices(string.ascii_letters + string.digits, k=noise.randint(1, 15)))


def stream(i: int, tool: bool, obfuscated: bool = False) -> list[bytes]:
    """A chat stream (`obfuscated`: as OpenAI sends it, random characters in every chunk)."""
    noise = random.Random(-1 - i) if obfuscated else None  # its own: the answer is the same either way
    rng = random.Random(i)
    sid, created = f"chatcmpl-{rng.getrandbits(128):032x}", 1732950000 + i
    words = [" token", *(f" {rng.choice(VOCAB)}" for _ in range(TOKENS - 2)), " Answer: Paris"]
    chunks = [chunk(sid, created, {"role": "assistant", "content": ""}, noise=noise)]
    if tool:
        head = {"index": 0, "id": f"call_{i}", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
        chunks.append(chunk(sid, created, {"tool_calls": [head]}, noise=noise))
        args = orjson.dumps({"city": "Paris", "note": "".join(words[:-1]).strip()}).decode()
        step = max(1, len(args) // (TOKENS - 1))
        for k in range(0, len(args), step):
            frag = {"index": 0, "function": {"arguments": args[k : k + step]}}
            chunks.append(chunk(sid, created, {"tool_calls": [frag]}, noise=noise))
    else:
        chunks.extend(chunk(sid, created, {"content": w}, noise=noise) for w in words)
    chunks.append(chunk(sid, created, {}, "tool_calls" if tool else "stop", noise))
    usage = {"prompt_tokens": 40, "completion_tokens": TOKENS, "total_tokens": TOKENS + 40}
    chunks.append(b"data: " + orjson.dumps({"id": sid, "choices": [], "usage": usage}) + b"\n\n")
    chunks.append(b"data: [DONE]\n\n")
    return chunks


def response_event(kind: str, seq: int, **fields: Any) -> bytes:
    obj = {"type": kind, "sequence_number": seq, **fields}
    return f"event: {kind}\ndata: ".encode() + orjson.dumps(obj) + b"\n\n"


def response_stream(i: int, tool: bool, obfuscated: bool = False) -> list[bytes]:
    """The same answer as `stream(i, tool)`, as a Responses API event stream (every delta event's `obfuscation` the
    same characters, or `obfuscated`: random ones, as OpenAI sends them)."""
    noise = random.Random(-1 - i) if obfuscated else None
    rng = random.Random(i)
    rid = f"resp_{rng.getrandbits(128):032x}"
    words = [" token", *(f" {rng.choice(VOCAB)}" for _ in range(TOKENS - 2)), " Answer: Paris"]
    head = {
        "id": rid,
        "object": "response",
        "created_at": 1732950000 + i,
        "status": "in_progress",
        "model": "gpt-4.1-mini-2025-04-14",
        "output": [],
        "usage": None,
    }
    out = [
        response_event("response.created", 0, response=head),
        response_event("response.in_progress", 1, response=head),
    ]
    seq = 2
    if tool:
        args = orjson.dumps({"city": "Paris", "note": "".join(words[:-1]).strip()}).decode()
        item = {
            "type": "function_call",
            "id": f"fc_{i:024x}",
            "call_id": f"call_{i}",
            "name": "get_weather",
            "arguments": "",
            "status": "in_progress",
        }
        out.append(response_event("response.output_item.added", seq, output_index=0, item=item))
        seq += 1
        step = max(1, len(args) // (TOKENS - 1))
        for k in range(0, len(args), step):
            out.append(
                response_event(
                    "response.function_call_arguments.delta",
                    seq,
                    item_id=item["id"],
                    output_index=0,
                    delta=args[k : k + step],
                    obfuscation=obfuscation(noise, "x7Qa"),
                )
            )
            seq += 1
        done = {**item, "arguments": args, "status": "completed"}
        out.append(
            response_event(
                "response.function_call_arguments.done", seq, item_id=item["id"], output_index=0, arguments=args
            )
        )
        out.append(response_event("response.output_item.done", seq + 1, output_index=0, item=done))
        seq += 2
    else:
        msg = {"type": "message", "id": f"msg_{i:024x}", "role": "assistant", "status": "in_progress", "content": []}
        out.append(response_event("response.output_item.added", seq, output_index=0, item=msg))
        out.append(
            response_event(
                "response.content_part.added",
                seq + 1,
                item_id=msg["id"],
                output_index=0,
                content_index=0,
                part={"type": "output_text", "text": "", "annotations": []},
            )
        )
        seq += 2
        for w in words:
            out.append(
                response_event(
                    "response.output_text.delta",
                    seq,
                    item_id=msg["id"],
                    output_index=0,
                    content_index=0,
                    delta=w,
                    logprobs=[],
                    obfuscation=obfuscation(noise, "k2Zp"),
                )
            )
            seq += 1
        text = "".join(words)
        part = {"type": "output_text", "text": text, "annotations": []}
        out.append(
            response_event(
                "response.output_text.done",
                seq,
                item_id=msg["id"],
                output_index=0,
                content_index=0,
                text=text,
                logprobs=[],
            )
        )
        out.append(
            response_event(
                "response.content_part.done", seq + 1, item_id=msg["id"], output_index=0, content_index=0, part=part
            )
        )
        done = {**msg, "status": "completed", "content": [part]}
        out.append(response_event("response.output_item.done", seq + 2, output_index=0, item=done))
        seq += 3
    usage = {
        "input_tokens": 40,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": TOKENS,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": TOKENS + 40,
    }
    final = {**head, "status": "completed", "output": [done], "usage": usage}
    out.append(response_event("response.completed", seq, response=final))
    return out


# Untagged traffic: chat streams, the same answers as Responses API streams, and both as OpenAI sends them (random
# `obfuscation` characters in every delta event).
TRAFFIC = ("chat", "responses", "chat-obf", "responses-obf")


def build_traffic(path: Path, n: int, api: str) -> None:
    """n untagged exchanges of one of TRAFFIC."""
    responses, obfuscated = api.startswith("responses"), api.endswith("-obf")
    with CassetteWriter(path) as w:
        for i in range(n):
            is_tool = i % 2 == 1
            chunks = response_stream(i, is_tool, obfuscated) if responses else stream(i, is_tool, obfuscated)
            record = exchange_record(chunks, id=f"x{i}", request={"model": "m", "stream": True}, event_us=7000)
            record.request.path = "/v1/responses" if responses else "/v1/chat/completions"
            record.request.headers.append(["User-Agent", "OpenAI/Python 1.99.0"])
            w.put(record)


def traffic_speed(tmp: Path, n: int, rounds: int, catalog: Catalog) -> dict[str, float]:
    """CPU seconds (best of rounds, interleaved) to rescore n untagged exchanges of each API with one job."""
    paths = {api: tmp / f"traffic-{api}.cassette" for api in TRAFFIC}
    for api, path in paths.items():
        build_traffic(path, n, api)
    best = dict.fromkeys(paths, float("inf"))
    for _ in range(rounds):
        for api, path in paths.items():
            lines: list[dict[str, Any]] = []
            t = time.process_time()
            _, results = rescored([path], catalog=catalog, jobs=1, traffic=lines)
            best[api] = min(best[api], time.process_time() - t)
            assert not results and len(lines) == n and not any(x["failed"] for x in lines), api
            endpoint = "responses" if api.startswith("responses") else "chat.completions"
            assert all(x["endpoint"] == endpoint for x in lines), api
    return best


def bench_catalog() -> Catalog:
    text = TestSpec(
        id="b.text",
        suite="b",
        category="c",
        subcategory="s",
        description="",
        messages=(),
        checks=(
            Check("contains_all", {"values": ["paris", "token"]}),
            Check("regex", {"pattern": r"Answer: \w+"}),
            Check("mentions", {"value": "Paris"}),
            Check("no_tool_call", {}),
        ),
        hash="ht",
    )
    tool = TestSpec(
        id="b.tool",
        suite="b",
        category="c",
        subcategory="s",
        description="",
        messages=(),
        tools=(TOOL,),
        checks=(
            Check("tool_called", {"name": "get_weather"}),
            Check("tool_args", {"name": "get_weather", "args": {"city": "paris", "note": {"any": True}}}),
            Check("call_count", {"max": 1}),
        ),
        hash="hw",
    )
    return Catalog(tests={"b.text": text, "b.tool": tool}, hash="bench", root=ROOT)


def changed_catalog() -> Catalog:
    """The benchmark's catalog with one check changed (the regex): what a user does before a second rescore."""
    catalog = bench_catalog()
    text = catalog.tests["b.text"]
    checks = tuple(Check("regex", {"pattern": r"Answer:\s+\w+"}) if c.evaluator == "regex" else c for c in text.checks)
    return Catalog(tests={**catalog.tests, "b.text": replace(text, checks=checks)}, hash="bench2", root=ROOT)


def build(path: Path, n: int) -> tuple[float, int]:
    """Write n exchanges; returns the mean SSE chunk size and the raw response bytes."""
    sizes: list[int] = []
    with CassetteWriter(path, run=RunMeta(id="bench", tests={"b.text": "ht", "b.tool": "hw"})) as w:
        for i in range(n):
            is_tool = i % 2 == 1
            chunks = stream(i, is_tool)
            sizes.extend(len(c) for c in chunks)
            tags = {
                "run": "bench",
                "test": "b.tool" if is_tool else "b.text",
                "model": f"m{i % 3}",
                "epoch": str(i),
                "turn": "0",
                "attempt": "1",
            }
            request = {"model": "m", "stream": True, "temperature": 0}
            w.put(exchange_record(chunks, id=f"x{i}", tags=tags, request=request, event_us=7000))
    return sum(sizes) / len(sizes), sum(sizes)


def rescore_to_temp(path: Path | str, catalog: Catalog, jobs: int, parse_cache: str | None = None) -> None:
    """`bench rescore` of one cassette into a scores file that is then thrown away (`parse_cache`: its folder)."""
    with tempfile.TemporaryDirectory() as tmp:
        request = Request([Path(path)], catalog=catalog, jobs=jobs, parse_cache=parse_cache)
        rescore(request, Path(tmp) / "scores.jsonl")


def parse_all(path: Path) -> None:
    """bench.core.parse over every record, results dropped at once and GC off, as the pipeline runs it."""
    gc.disable()
    try:
        for r in CassetteReader(path):
            parse_exchange(r)
    finally:
        gc.enable()


def timed(fn: Any, rounds: int, clock: Any = time.perf_counter) -> float:
    best = float("inf")
    for _ in range(rounds):
        t = clock()
        fn()
        best = min(best, clock() - t)
    return best


def peak_rss_mib(path: Path) -> float:
    """Peak RSS of a fresh interpreter that rescores `path` with one job: what a user's `bench rescore` holds.

    Read from VmHWM, which a new program starts afresh: ru_maxrss would carry over this (large) parent's peak."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from benchmarks.rescore_speed import bench_catalog; "
        "from benchmarks.rescore_speed import rescore_to_temp; rescore_to_temp(sys.argv[2], bench_catalog(), 1); "
        "print(next(line for line in open('/proc/self/status') if line.startswith('VmHWM')))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(ROOT), str(path)], capture_output=True, check=True, text=True)
    return int(out.stdout.split()[-2]) / 1024


STEPS = {
    "read": "read only (decompress + unpack + checks)",
    "parse": "read + parse",
    "first": "first rescore --jobs 1 (empty parse cache)",
    "nocache": "rescore --jobs 1, no parse cache",
    "second": "second rescore, one check changed (cache)",
    "chat": "untagged chat traffic, first rescore",
    "responses": "untagged Responses API traffic, first rescore",
    "chat-obf": "untagged chat traffic, OpenAI-style (random obfuscation)",
    "responses-obf": "untagged Responses API traffic, OpenAI-style (random obfuscation)",
}


def side_by_side(trees: list[Path], n: int, rounds: int) -> None:
    """Every tree's steps in interleaved rounds, one process per tree and round; exchanges/s per core."""
    script = ROOT / "benchmarks" / "rescore_tree.py"
    with tempfile.TemporaryDirectory() as tmp:
        works = [Path(tmp) / f"tree{i}" for i in range(len(trees))]

        def run(tree: Path, work: Path, *extra: str) -> str:
            cmd = [sys.executable, str(script), "--tree", str(tree), "--work", str(work), "--exchanges", str(n)]
            return subprocess.run([*cmd, *extra], capture_output=True, check=True, text=True).stdout

        for tree, work in zip(trees, works, strict=True):
            run(tree, work, "--build-only")
        seen: list[dict[str, list[float]]] = [{} for _ in trees]
        order = list(range(len(trees)))
        rng = random.Random(37)
        for _ in range(rounds):
            rng.shuffle(order)
            for i in order:
                for step, seconds in orjson.loads(run(trees[i], works[i]).splitlines()[-1]).items():
                    seen[i].setdefault(step, []).append(n / seconds)
    print(f"{n} exchanges, {rounds} interleaved rounds, exchanges/s per core (CPU time): best / median")
    print("| step | " + " | ".join(str(t) for t in trees) + " | " + " | ".join(f"{t.name} / this" for t in trees[1:]))
    print("|---" * (2 * len(trees)) + "|")
    for step, label in STEPS.items():
        if step not in seen[0]:
            continue
        cells = []
        for figures in seen:
            got = figures.get(step)
            cells.append(f"{max(got):,.0f} / {statistics.median(got):,.0f}" if got else "-")
        ratios = []
        for figures in seen[1:]:
            got = figures.get(step)
            ratios.append(f"{statistics.median(got) / statistics.median(seen[0][step]):.2f}x" if got else "-")
        print(f"| {label} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    chat, responses = seen[0].get("chat"), seen[0].get("responses")
    if chat and responses:
        print(f"this tree: Responses API / chat speed {statistics.median(responses) / statistics.median(chat):.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--exchanges", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--memory", action="store_true", help="also peak RSS for n and 4n exchanges (builds 4n more)")
    ap.add_argument("--baseline", type=Path, action="append", default=[], help="another source tree to compare with")
    args = ap.parse_args()
    if args.baseline:
        side_by_side([ROOT, *args.baseline], args.exchanges, args.rounds)
        return
    cores = os.cpu_count() or 1
    catalog = bench_catalog()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "speed.cassette"
        avg, raw = build(path, args.exchanges)
        n = args.exchanges
        size = path.stat().st_size
        print(
            f"{n} exchanges, {TOKENS} tokens each, {avg:.0f} B per SSE chunk, {size >> 10} KiB file ({raw / size:.0f}x)"
        )
        read = timed(lambda: sum(1 for _ in CassetteReader(path)), args.rounds)
        parse = timed(lambda: parse_all(path), args.rounds)
        one = timed(lambda: rescore_to_temp(path, catalog, 1), args.rounds)
        many = timed(lambda: rescore_to_temp(path, catalog, cores), args.rounds)
        # CPU time of this process only: less sensitive to other load on a shared machine than the wall clock.
        parse_cpu = timed(lambda: parse_all(path), args.rounds, time.process_time)
        one_cpu = timed(lambda: rescore_to_temp(path, catalog, 1), args.rounds, time.process_time)
        _, results = rescored([path], catalog=catalog, jobs=1)
        assert len(results) == n and all(r.passed for r in results), "benchmark inputs must all pass"
        untagged = traffic_speed(Path(tmp), n, args.rounds, catalog)
        if args.memory:
            big = Path(tmp) / "speed4.cassette"
            _, raw4 = build(big, 4 * n)
            rss = [(n, raw, peak_rss_mib(path)), (4 * n, raw4, peak_rss_mib(big))]
    print(f"read only (decompress + unpack): {n / read:9.0f} exchanges/s")
    print(f"read + parse:                    {n / parse:9.0f} exchanges/s  (parse share of jobs=1: {parse / one:.0%})")
    print(f"rescore --jobs 1:                {n / one:9.0f} exchanges/s  (goal: >= 1000 per core)")
    print(
        f"CPU time, jobs=1: {n / one_cpu:.0f} exchanges/s per core; bench.core.parse alone {n / parse_cpu:.0f}/s "
        f"= {parse_cpu / one_cpu:.0%} of the CPU time"
    )
    print(f"rescore --jobs {cores}:                {n / many:9.0f} exchanges/s  ({one / many:.2f}x of jobs=1)")
    chat_s, resp_s = untagged["chat"], untagged["responses"]
    print(
        f"untagged traffic, jobs=1, CPU time: chat {n / chat_s:.0f} exchanges/s/core, Responses API "
        f"{n / resp_s:.0f} exchanges/s/core (Responses / chat: {chat_s / resp_s:.2f}x the speed)"
    )
    print(
        f"OpenAI-style (random obfuscation): chat {n / untagged['chat-obf']:.0f} exchanges/s/core, Responses API "
        f"{n / untagged['responses-obf']:.0f} exchanges/s/core"
    )
    if args.memory:
        for count, raw_bytes, mib in rss:
            print(f"peak RSS rescoring {count} exchanges ({raw_bytes / 2**20:.0f} MiB of responses): {mib:.0f} MiB")


if __name__ == "__main__":
    main()
