"""The parse of untagged traffic with the run finders on and off, A/B in one process, per source tree.

The streams are benchmarks/rescore_speed.py's untagged traffic (chat and Responses API, each also as OpenAI sends it:
random `obfuscation` characters in every delta event), written once as cassettes. Each round runs one process per tree
(random order) that reads the records into memory and times bench's parse of every exchange (CPU time), the run
finders on and then off (`chat_run` / `response_run` patched to find nothing: the event-by-event path), twice each
in turn. Prints microseconds per exchange (median of the rounds' best) and how much faster the runs make the parse.

    .venv/bin/python benchmarks/run_finder_ab.py [--exchanges 400] [--rounds 5] [--tree DIR ...]
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def child(tree: Path, work: Path) -> None:
    sys.path.insert(0, str(tree))  # that tree's bench, nothing of this one's
    import bench.core.parse as parse
    import bench.core.parse_responses as parse_responses
    from bench.core.cassette import CassetteReader

    out: dict[str, dict[str, float]] = {}
    for path in sorted(work.glob("traffic-*.cassette")):
        records = list(CassetteReader(path))
        best = {"on": float("inf"), "off": float("inf")}
        found = parse.chat_run, parse_responses.response_run
        for _ in range(2):
            for mode in ("on", "off"):
                if mode == "off":
                    parse.chat_run, parse_responses.response_run = (lambda reads: None), (lambda reads: None)  # type: ignore[assignment]
                gc.disable()
                start = time.process_time()
                for record in records:
                    parse.parse_exchange(record)
                best[mode] = min(best[mode], (time.process_time() - start) / len(records))
                gc.enable()
                parse.chat_run, parse_responses.response_run = found
        out[path.stem.removeprefix("traffic-")] = best
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--exchanges", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tree", type=Path, action="append", default=[])
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.work)
        return
    sys.path.insert(0, str(ROOT))
    from benchmarks.rescore_speed import TRAFFIC, build_traffic

    trees = [ROOT, *args.tree]
    seen: list[dict[str, dict[str, list[float]]]] = [{} for _ in trees]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for api in TRAFFIC:
            build_traffic(work / f"traffic-{api}.cassette", args.exchanges, api)
        order, rng = list(range(len(trees))), random.Random(38)
        for _ in range(args.rounds):
            rng.shuffle(order)
            for i in order:
                cmd = [sys.executable, __file__, "--child", str(trees[i]), "--work", str(work)]
                got: dict[str, Any] = json.loads(subprocess.run(cmd, capture_output=True, check=True, text=True).stdout)
                for api, modes in got.items():
                    for mode, seconds in modes.items():
                        seen[i].setdefault(api, {}).setdefault(mode, []).append(seconds * 1e6)
    print(f"{args.exchanges} exchanges a kind, {args.rounds} rounds; us per exchange (median), runs on / off")
    print("| tree | traffic | runs on | runs off | off / on |")
    print("|---|---|---|---|---|")
    for tree, figures in zip(trees, seen, strict=True):
        for api in TRAFFIC:
            on, off = (statistics.median(figures[api][m]) for m in ("on", "off"))
            print(f"| {tree} | {api} | {on:.0f} | {off:.0f} | {off / on:.2f}x |")


if __name__ == "__main__":
    main()
