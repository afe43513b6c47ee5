"""Peak RSS of `bench report` (and `compare`, `health`) on a scores file of N and 4N exchanges, this tree vs another.

Writes two scores files following docs/scores-format.md: synthetic results (tests/scorer/report/factory.py: 4
models, 250 tests, retries, errors, `--gaps` inter-token gaps per exchange on average) and a traffic line per
exchange, N and 4N exchanges: the same tests in more epochs (5 more per 5,000 exchanges), so what a report counts
by groups stays the same size while the exchanges grow. Each command runs in a fresh interpreter (its VmHWM is its
own peak) from this tree and from `--before` (a git ref, exported with `git archive`; `--after REF` measures a ref
instead of the working tree), sizes and trees interleaved, best of `--rounds`; the outputs of the two trees are
compared byte for byte (JSON).

    .venv/bin/python benchmarks/report_memory.py [--exchanges 50000] [--before main] [--rounds 1]
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path
from typing import Any

import numpy as np
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.scorer.report.factory import meta, synthetic  # noqa: E402

# Runs `bench` from the tree given first, whatever is installed (an editable install's import hook is dropped and
# the tree's folders come first on the path), and prints the process's peak RSS.
RUN = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in str(getattr(f, '__module__', ''))]; "
    "from bench.cli import main; code = main(sys.argv[2:]); "
    "print(next(line for line in open('/proc/self/status') if line.startswith('VmHWM')), file=sys.stderr); "
    "sys.exit(code)"
)
BATCH = 5_000


def write_file(path: Path, exchanges: int, gaps: int, seed: int) -> None:
    """Results in batches (the same tests, the next epochs), then a traffic line per exchange: the file is written as it
    is generated, so generating 4N does not hold 4N."""
    rng = random.Random(seed)
    gauss = np.random.default_rng(seed)
    traffic = path.with_suffix(".traffic")
    with open(path, "wb") as out, open(traffic, "wb") as side:
        out.write(orjson.dumps(meta(), option=orjson.OPT_SORT_KEYS) + b"\n")
        done = 0
        while done < exchanges:
            batch = synthetic(min(BATCH, exchanges - done), seed=seed + done, models=4, epochs=5)
            for r in batch:
                # The same catalog each batch, more epochs: the report's groups stay, the exchanges grow.
                r["epoch"] += 5 * (done // BATCH)
                for ex in r["exchanges"]:
                    ex["id"] = f"{ex['id']}-{done // BATCH}"
                    if ex["itl_us"]:
                        n = max(1, int(gauss.normal(gaps, gaps / 4)))
                        ex["itl_us"] = np.maximum(100, gauss.normal(5_000, 1_500, n)).astype(int).tolist()
                    side.write(orjson.dumps(_traffic(r, ex, rng), option=orjson.OPT_SORT_KEYS) + b"\n")
                out.write(orjson.dumps(r, option=orjson.OPT_SORT_KEYS) + b"\n")
            done += len(batch)
        side.close()
        with open(traffic, "rb") as fh:
            while chunk := fh.read(1 << 20):
                out.write(chunk)
    traffic.unlink()


def _traffic(r: dict[str, Any], ex: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    return {
        "kind": "traffic",
        "cassette": f"part-{rng.randrange(40)}.cassette",
        "id": ex["id"],
        "started": 1_700_000_000_000_000 + rng.randrange(10**10),
        "endpoint": "/v1/chat/completions",
        "method": "POST",
        "model": r["model"],
        "served_model": r["model"],
        "client": "openai-python",
        "test": r["test"],
        "status": ex["status"],
        "outcome": ex["outcome"],
        "streamed": True,
        "failed": ex["outcome"] != "complete",
        "findings": [],
        "input_tokens": rng.randrange(20, 400),
        "input_tokens_source": "usage",
        "cached_input_tokens": 0,
        "output_tokens": len(ex["itl_us"] or ()) + 1 if ex["itl_us"] else None,
        "tokens_source": "usage",
        "ttft_us": ex["ttft_us"],
        "tpot_us": ex["tpot_us"],
        "e2el_us": ex["e2el_us"],
        "itl_us": ex["itl_us"],
        "n_events": 0,
        "system_fingerprint": r["system_fingerprint"],
        "unknown_events": {},
    }


def export(ref: str, into: Path) -> Path:
    data = subprocess.run(["git", "-C", str(ROOT), "archive", ref], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def peak(tree: Path, argv: list[str]) -> float:
    done = subprocess.run([sys.executable, "-c", RUN, str(tree), *argv], capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} failed in {tree}: {done.stderr.strip()[-400:]}")
    line = next(x for x in done.stderr.splitlines() if x.startswith("VmHWM"))
    return int(line.split()[-2]) / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exchanges", type=int, default=50_000)
    ap.add_argument("--gaps", type=int, default=40, help="inter-token gaps per exchange, on average")
    ap.add_argument("--before", default="main", help="git ref of the tree to compare with")
    ap.add_argument("--after", help="git ref of the tree measured (default: this working tree as it is)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--commands", default="report,compare,health")
    args = ap.parse_args()
    commands = args.commands.split(",")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        after = export(args.after, tmp / "after") if args.after else ROOT
        trees = {"before": export(args.before, tmp / "before"), "after": after}
        files: dict[int, tuple[Path, Path]] = {}
        for n in (args.exchanges, 4 * args.exchanges):
            a, b = tmp / f"a-{n}.jsonl", tmp / f"b-{n}.jsonl"
            write_file(a, n, args.gaps, seed=1)
            write_file(b, n, args.gaps, seed=2)
            files[n] = (a, b)
            print(f"{n:,} exchanges: {a.stat().st_size / 2**20:.0f} MiB per scores file", flush=True)
        best: dict[tuple[str, str, int], float] = {}
        for _ in range(args.rounds):
            for n, (a, b) in files.items():
                for command in commands:
                    for name, tree in trees.items():
                        out = tmp / f"{name}-{command}-{n}.json"
                        paths = {"report": [str(a)], "compare": [str(a), str(b)], "health": [str(a), str(b)]}
                        argv = [command, *paths[command], "--format", "json", "--out", str(out)]
                        mib = peak(tree, argv)
                        key = (command, name, n)
                        best[key] = min(best.get(key, float("inf")), mib)
        small, large = args.exchanges, 4 * args.exchanges
        print(f"peak RSS (MiB), {args.gaps} gaps per exchange on average; before = {args.before}")
        print(f"{'command':8} {'tree':6} {small:>9,} {large:>9,}  ratio")
        for command in commands:
            for name in trees:
                lo, hi = best[(command, name, small)], best[(command, name, large)]
                print(f"{command:8} {name:6} {lo:9.0f} {hi:9.0f}  {hi / lo:.2f}x")
            for n in (small, large):
                before = (tmp / f"before-{command}-{n}.json").read_bytes()
                after = (tmp / f"after-{command}-{n}.json").read_bytes()
                print(f"  {command} output at {n:,}: {_difference(before, after)}")


def _difference(before: bytes, after: bytes) -> str:
    """Byte-identical, or how far apart: the same document but for numbers that differ by at most a relative X."""
    if before == after:
        return "byte-identical"
    worst = [0.0]

    def same(x: Any, y: Any) -> bool:
        if isinstance(x, float) and isinstance(y, float):
            if x == y:
                return True
            worst[0] = max(worst[0], abs(x - y) / max(abs(x), abs(y)))
            return True
        if isinstance(x, dict) and isinstance(y, dict):
            return x.keys() == y.keys() and all(same(x[k], y[k]) for k in x)
        if isinstance(x, list) and isinstance(y, list):
            return len(x) == len(y) and all(same(v, w) for v, w in zip(x, y, strict=True))
        return bool(x == y)

    lines = sum(1 for x, y in zip(before.splitlines(), after.splitlines(), strict=False) if x != y)
    if not same(orjson.loads(before), orjson.loads(after)):
        return f"different documents ({lines} lines differ)"
    return f"{lines} lines differ, only in floats, by at most {worst[0]:.1e} relative"


if __name__ == "__main__":
    main()
