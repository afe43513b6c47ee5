"""Peak RSS of the coordinating `bench rescore` process for N and 4N exchanges: does memory grow with the run?

Builds one cassette of `--per-cassette` short tagged exchanges (no run id, so copies are not merged as re-recordings
of one job) and copies it until the folder holds N exchanges, then 4N in another folder. Each folder is rescored
twice by `bench rescore` in a fresh interpreter (the second run reads the first's scores file to find flips, as a
user's repeated rescore does) and the second run's VmHWM is read: the coordinator's own peak (pool workers are
other processes and are not counted). Sizes are interleaved (N, 4N, N, 4N, ...) and the best of `--rounds` kept.

    .venv/bin/python benchmarks/rescore_memory.py [--exchanges 50000] [--jobs 1] [--rounds 1]

Exchanges are short (`--tokens`, default 40 streamed tokens) so that 200,000 of them score in minutes on a shared
machine; a result's size grows with its tokens (one inter-token gap each), so the absolute MiB are a floor for long
answers, while the ratio is what the measure is about.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.core.cassette import CassetteWriter  # noqa: E402
from bench.scorer.synth import exchange_record  # noqa: E402
from benchmarks import rescore_speed  # noqa: E402

CATALOG_CODE = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from benchmarks.rescore_speed import bench_catalog; import bench.catalog.model as t; "
    "t.load_catalog = lambda *a, **k: bench_catalog(); "
    "from bench.cli import main; code = main(sys.argv[2:]); "
    "print(next(line for line in open('/proc/self/status') if line.startswith('VmHWM')), file=sys.stderr); "
    "sys.exit(code)"
)


def build_template(path: Path, n: int, tokens: int) -> None:
    rescore_speed.TOKENS = tokens
    with CassetteWriter(path) as w:
        for i in range(n):
            is_tool = i % 2 == 1
            tags = {"test": "b.tool" if is_tool else "b.text", "model": f"m{i % 3}", "epoch": str(i)}
            request = {"model": "m", "stream": True, "temperature": 0}
            chunks = rescore_speed.stream(i, is_tool)
            w.put(exchange_record(chunks, id=f"x{i}", tags=tags, request=request, event_us=7000))


def fill(folder: Path, template: Path, copies: int) -> None:
    folder.mkdir()
    for k in range(copies):
        shutil.copyfile(template, folder / f"part-{k:05d}.cassette")


def peak_rss_mib(folder: Path, jobs: int) -> float:
    """VmHWM of a fresh `bench rescore` (its own peak: a new program starts with a fresh high-water mark)."""
    out = folder / "scores.jsonl"
    argv = [sys.executable, "-c", CATALOG_CODE, str(ROOT), "rescore", str(folder), "--jobs", str(jobs), "--out"]
    argv.append(str(out))
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    line = next(x for x in done.stderr.splitlines() if x.startswith("VmHWM"))
    return int(line.split()[-2]) / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--exchanges", type=int, default=50_000)
    ap.add_argument("--per-cassette", type=int, default=2_500)
    ap.add_argument("--tokens", type=int, default=40)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    copies = max(1, args.exchanges // args.per_cassette)
    with tempfile.TemporaryDirectory() as tmp:
        template = Path(tmp) / "template.cassette"
        build_template(template, args.per_cassette, args.tokens)
        sizes = {copies * args.per_cassette: copies, 4 * copies * args.per_cassette: 4 * copies}
        folders = {}
        for n, c in sizes.items():
            folders[n] = Path(tmp) / f"run-{n}"
            fill(folders[n], template, c)
            peak_rss_mib(folders[n], args.jobs)  # the earlier scores file the measured runs compare against
        best = dict.fromkeys(sizes, float("inf"))
        for _ in range(args.rounds):
            for n, folder in folders.items():
                best[n] = min(best[n], peak_rss_mib(folder, args.jobs))
    small, large = sorted(best)
    print(f"{args.tokens} tokens per exchange, {args.per_cassette} exchanges per cassette, --jobs {args.jobs}")
    for n in (small, large):
        print(f"coordinator peak RSS, {n} exchanges (rescore with an earlier scores file): {best[n]:.0f} MiB")
    print(f"ratio {large} / {small}: {best[large] / best[small]:.2f}x (goal: <= 1.2x, and < 300 MB)")


if __name__ == "__main__":
    main()
