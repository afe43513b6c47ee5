"""`bench load` side by side with NVIDIA AIPerf (`aiperf profile`) against the same `bench sim`, same settings, in
one run (docs/load.md, "Against AIPerf").

AIPerf lives in its own virtualenv so that its dependencies never touch the project's (`python3 -m venv
/work/venvs/aiperf && /work/venvs/aiperf/bin/pip install aiperf`; pass its path with --aiperf). It needs a tokenizer
and this machine has no network to fetch one: the script writes a word-level tokenizer (tokenizer.json, the words
bench's tokenizer-free prompts are made of) that AIPerf loads from a folder; output tokens are counted from usage on
both sides (--use-server-token-count).

Two parts:
- agreement: the two tools in interleaved rounds (random order each round) at the same concurrency or rate, the
  same prompt and output lengths (`ignore_eos`), streaming; per tool the median over rounds of request throughput,
  output token throughput, TTFT p50/p99 and the gaps between chunks p50/p99 (bench's ITL, AIPerf's ICL), and
  AIPerf's ITL next to bench's TPOT (AIPerf's ITL is a per-request mean, vLLM's TPOT);
- ceiling (--ceiling): each tool pinned to one core (taskset -c 0, bench's proxy recording in the same process),
  the simulator on the other, streaming as fast as it can; requests/s and streamed events/s each sustains, as a
  ratio bench / AIPerf.

    flock /tmp/bench-quiet.lock python benchmarks/load_vs_aiperf.py --rounds 3
    flock /tmp/bench-quiet.lock python benchmarks/load_vs_aiperf.py --ceiling
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.catalog.loadgen.sources.synthetic import WORDS  # noqa: E402
from bench.catalog.sim.stream import FILLER  # noqa: E402
from tests.support.llm_server import free_port  # noqa: E402
from tests.support.sim_process import pinned, start_sim_process  # noqa: E402

Metrics = dict[str, float]


def word_tokenizer(folder: Path) -> Path:
    """A Hugging Face tokenizer folder AIPerf can load offline: one token per whitespace-separated word."""
    folder.mkdir(parents=True, exist_ok=True)
    vocab = {"[UNK]": 0}
    generic = "Hello from the bench simulator. This answer is simulated; no model ran."
    for word in [*WORDS, *generic.split(), *("".join(FILLER).split())]:
        vocab.setdefault(word, len(vocab))
    unk = {"id": 0, "content": "[UNK]", "single_word": False, "lstrip": False, "rstrip": False}
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{**unk, "normalized": False, "special": True}], "normalizer": None,
        "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None, "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"},
    }  # fmt: skip
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "model_max_length": 1 << 20}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


def _load_flags(args: argparse.Namespace) -> list[str]:
    if args.rate:
        return ["--rate", str(args.rate), "--arrival", "constant"]
    return ["--concurrency", str(args.concurrency)]


def run_bench(url: str, args: argparse.Namespace, work: Path, pin: str | None) -> Metrics:
    out = work / f"bench-{time.monotonic_ns()}"
    command = [sys.executable, "-m", "bench", "load", "--upstream", url, "--model", "oracle", *_load_flags(args),
               "--requests", str(args.requests), "--synthetic", f"input={args.input},output={args.output}",
               "--ignore-eos", "--out", str(out)]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(pinned(command, pin), cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"bench load failed: {done.stderr[-2000:]}")
    report = subprocess.run([sys.executable, "-m", "bench", "report", str(out), "--format", "json"], cwd=ROOT,
                            capture_output=True, text=True, check=True)  # fmt: skip
    (row,) = json.loads(report.stdout)["levels"]["rows"]
    t = row["timing"]
    return {
        "request throughput (req/s)": row["request_throughput"],
        "output token throughput (tok/s)": row["output_throughput"],
        "TTFT p50 (ms)": t["ttft_ms"]["p50"], "TTFT p99 (ms)": t["ttft_ms"]["p99"],
        "chunk gap p50 (ms)": t["itl_ms"]["p50"], "chunk gap p99 (ms)": t["itl_ms"]["p99"],
        "TPOT / AIPerf ITL p50 (ms)": t["tpot_ms"]["p50"], "TPOT / AIPerf ITL p99 (ms)": t["tpot_ms"]["p99"],
        "events/s": row["output_throughput"], "wall (s)": wall,
    }  # fmt: skip


def run_aiperf(url: str, args: argparse.Namespace, work: Path, tokenizer: Path, pin: str | None) -> Metrics:
    out = work / f"aiperf-{time.monotonic_ns()}"
    load = (["--request-rate", str(args.rate), "--arrival-pattern", "constant"] if args.rate
            else ["--concurrency", str(args.concurrency)])  # fmt: skip
    command = [args.aiperf, "profile", "--model", "oracle", "--url", url, "--endpoint-type", "chat", "--streaming",
               *load, "--request-count", str(args.requests), "--tokenizer", str(tokenizer),
               "--synthetic-input-tokens-mean", str(args.input), "--synthetic-input-tokens-stddev", "0",
               "--output-tokens-mean", str(args.output), "--output-tokens-stddev", "0",
               "--extra-inputs", "ignore_eos:true", "--use-server-token-count", "--artifact-dir", str(out),
               "--ui-type", "none"]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(pinned(command, pin), capture_output=True, text=True)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"aiperf failed: {done.stdout[-3000:]}")
    d = json.loads((out / "profile_export_aiperf.json").read_text())
    return {
        "request throughput (req/s)": d["request_throughput"]["avg"],
        "output token throughput (tok/s)": d["output_token_throughput"]["avg"],
        "TTFT p50 (ms)": d["time_to_first_token"]["p50"], "TTFT p99 (ms)": d["time_to_first_token"]["p99"],
        "chunk gap p50 (ms)": d["inter_chunk_latency"]["p50"], "chunk gap p99 (ms)": d["inter_chunk_latency"]["p99"],
        "TPOT / AIPerf ITL p50 (ms)": d["inter_token_latency"]["p50"],
        "TPOT / AIPerf ITL p99 (ms)": d["inter_token_latency"]["p99"],
        "events/s": d["output_token_throughput"]["avg"], "wall (s)": wall,
    }  # fmt: skip


def rounds(n: int, tools: dict[str, Callable[[], Metrics]]) -> dict[str, list[Metrics]]:
    out: dict[str, list[Metrics]] = {name: [] for name in tools}
    rng = random.Random(0)
    for i in range(n):
        order = list(tools)
        rng.shuffle(order)
        for name in order:
            out[name].append(tools[name]())
            print(f"round {i + 1}: {name} done", file=sys.stderr, flush=True)
    return out


def median(runs: list[Metrics], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aiperf", default="/work/venvs/aiperf/bin/aiperf")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rate", type=float, help="constant arrivals at this rate instead of --concurrency")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--input", type=int, default=64)
    parser.add_argument("--output", type=int, help="output tokens (default 20; 64 with --ceiling)")
    parser.add_argument("--ttft-ms", type=float, help="default 100 (0 with --ceiling)")
    parser.add_argument("--tokens-per-second", type=float, help="default 50 (1e6 with --ceiling: back to back)")
    parser.add_argument("--ceiling", action="store_true", help="the tools' own ceilings, each on one core")
    args = parser.parse_args()
    for name, usual, ceiling in (("output", 20, 64), ("ttft_ms", 100.0, 0.0), ("tokens_per_second", 50.0, 1e6)):
        if getattr(args, name) is None:
            setattr(args, name, ceiling if args.ceiling else usual)
    if args.ceiling:
        args.concurrency, args.requests = max(args.concurrency, 64), max(args.requests, 3000)
    pins = ("0", "1") if args.ceiling else (None, None)
    port = free_port()
    sim = start_sim_process(
        port, "--ttft-ms", str(args.ttft_ms), "--tokens-per-second", str(args.tokens_per_second), core=pins[1]
    )
    url = f"http://127.0.0.1:{port}"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            tokenizer = word_tokenizer(work / "tokenizer")
            runs = rounds(args.rounds, {
                "bench": lambda: run_bench(url, args, work, pins[0]),
                "aiperf": lambda: run_aiperf(url, args, work, tokenizer, pins[0]),
            })  # fmt: skip
    finally:
        sim.terminate()
        sim.wait()
    load = f"rate {args.rate:g}/s constant" if args.rate else f"concurrency {args.concurrency}"
    gap = 1000 / args.tokens_per_second
    cores = " (each tool on one core)" if args.ceiling else ""
    print(f"bench sim TTFT {args.ttft_ms:g} ms, {args.tokens_per_second:g} tok/s ({gap:g} ms a token), {load}, "
          f"{args.requests} requests, input {args.input} words, output {args.output} tokens, "
          f"median of {args.rounds} interleaved round(s){cores}")  # fmt: skip
    keys = list(runs["bench"][0])
    print(f"{'metric':34} {'bench':>10} {'AIPerf':>10} {'bench/AIPerf':>13} {'bench-AIPerf':>13}")
    for key in keys:
        b, a = median(runs["bench"], key), median(runs["aiperf"], key)
        print(f"{key:34} {b:10.3f} {a:10.3f} {b / a if a else float('nan'):13.3f} {b - a:13.3f}")
    print("rounds:", json.dumps({k: [{m: round(v, 3) for m, v in r.items()} for r in rs] for k, rs in runs.items()}))


if __name__ == "__main__":
    main()
