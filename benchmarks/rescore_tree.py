"""One round of `benchmarks/rescore_speed.py --baseline` for one source tree, in a process of its own.

Loads TREE/benchmarks/rescore_speed.py (which puts TREE first on sys.path, so every import is that tree's code: this
tree, today's main before the namespace move, or 750db77 before format v2), builds its cassettes once in WORK (each
tree writes its own format), and prints the CPU seconds of this process for each step as one JSON line:
- read: decompress + unpack (+ checks) of every record; parse: read + bench's parse of every exchange;
- first: `rescore --jobs 1` as that tree's `bench rescore` runs it, a scores file written (a tree with a parse cache:
  into an empty one, so writing it is counted);
- nocache: the same without a cache (trees with one); second: again with one check changed (the regex), reading
  the parses the first left (the loop the cache is for);
- chat / responses: untagged Chat Completions / Responses API traffic rescored with one job (trees that have it),
  into an empty cache where there is one; chat-obf / responses-obf: the same as OpenAI sends it (random
  `obfuscation` characters in every delta event; trees that have them).

    python benchmarks/rescore_tree.py --tree DIR --work DIR [--exchanges 4000] [--build-only]
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import inspect
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any


def load(tree: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("tree_rescore_speed", tree / "benchmarks" / "rescore_speed.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def old_layout_rescore(rs: ModuleType, source: Path, catalog: Any, out: Path, traffic: bool) -> None:
    """What `bench rescore` does in a tree before the namespace move: a scores file written, as in today's tree (the
    in-memory pipeline alone skips the encoding and writing, ~12% of a rescore, and flattered those trees)."""
    # By name: this tree's code imports no top-level `scorer` (tests/test_layers.py); the older trees' code is that.
    try:
        merge = importlib.import_module("scorer.merge")  # today's main before the move
    except ImportError:  # 750db77: the pipeline's results, then the file written whole
        meta, results = rs.rescore([source], catalog=catalog, jobs=1, **({"traffic": []} if traffic else {}))
        importlib.import_module("scorer.scores_io").write_scores(out, meta, results)
        return
    merge.rescore_to_file([source], out, catalog=catalog, jobs=1)


def cpu(fn: Callable[[], Any]) -> float:
    gc.collect()
    start = time.process_time()
    fn()
    return time.process_time() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--exchanges", type=int, default=4000)
    ap.add_argument("--build-only", action="store_true")
    args = ap.parse_args()
    rs = load(args.tree.resolve())
    work: Path = args.work
    work.mkdir(parents=True, exist_ok=True)
    path = work / "speed.cassette"
    # A tree's own traffic steps (an older tree has no OpenAI-style ones: its table cell is "-").
    apis = getattr(rs, "TRAFFIC", ("chat", "responses")) if hasattr(rs, "build_traffic") else ()
    if not path.exists():
        rs.build(path, args.exchanges)
        for api in apis:
            rs.build_traffic(work / f"traffic-{api}.cassette", args.exchanges, api)
    if args.build_only:
        return
    catalog = rs.bench_catalog()
    folder = work / "parse-cache"
    shutil.rmtree(folder, ignore_errors=True)
    # Today's trees rescore into a scores file (rescore_to_temp); older ones return results (rescore).
    cached = hasattr(rs, "rescore_to_temp") and "parse_cache" in inspect.signature(rs.rescore_to_temp).parameters

    def rescore(source: Path, cat: Any, cache: bool = True) -> None:
        if hasattr(rs, "rescore_to_temp"):
            rs.rescore_to_temp(source, cat, 1, **({"parse_cache": str(folder)} if cached and cache else {}))
        else:
            old_layout_rescore(rs, source, cat, work / "scores.jsonl", traffic=bool(apis))

    out: dict[str, float] = {
        "read": cpu(lambda: sum(1 for _ in rs.CassetteReader(path))),
        "parse": cpu(lambda: rs.parse_all(path)),
        "first": cpu(lambda: rescore(path, catalog)),
    }
    if cached:
        out["nocache"] = cpu(lambda: rescore(path, catalog, cache=False))
        changed = rs.changed_catalog()
        out["second"] = cpu(lambda: rescore(path, changed))
    for api in apis:
        shutil.rmtree(folder, ignore_errors=True)
        traffic = work / f"traffic-{api}.cassette"
        out[api] = cpu(lambda traffic=traffic: rescore(traffic, catalog))
    shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
