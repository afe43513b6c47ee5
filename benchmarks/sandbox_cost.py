"""The code sandbox's cost per program, side by side: start-to-exit of a trivial program through today's sandbox
(bubblewrap) and through the one before it (setpriv/prlimit/unshare, loaded from git at --old-rev), interleaved in
random order in one process, p50 and p99 of each.

    flock /tmp/bench-quiet.lock .venv/bin/python benchmarks/sandbox_cost.py --runs 300 --old-rev 0180526
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np

from bench.workspace import sandbox

ROOT = Path(__file__).resolve().parent.parent


def old_module(rev: str) -> ModuleType:
    """The sandbox module as it was at `rev` (one file then), imported under another name."""
    source = subprocess.run(
        ["git", "show", f"{rev}:bench/workspace/sandbox.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    path = Path(tempfile.mkdtemp()) / "old_sandbox.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("old_sandbox", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["old_sandbox"] = module
    spec.loader.exec_module(module)
    return module


def timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    result = run()
    elapsed = time.perf_counter() - start
    assert getattr(result, "ok", False), result
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--old-rev", default="0180526")
    args = parser.parse_args()
    old = old_module(args.old_rev)
    # Warm both (interpreter lookup, the availability probe).
    old.run_python("pass", "", 5)
    sandbox.run_python("pass", "", 5)
    cases: dict[str, Callable[[], object]] = {
        "old: python -c pass": lambda: old.run_python("pass", "", 5),
        "new: python -c pass": lambda: sandbox.run_python("pass", "", 5),
        "old: /bin/true": lambda: _old_true(old),
        "new: /bin/true": lambda: _new_true(),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    order = [name for name in cases for _ in range(args.runs)]
    random.shuffle(order)
    for name in order:
        times[name].append(timed(cases[name]))
    print(f"{args.runs} runs each, interleaved in random order; start-to-exit in ms")
    print(f"{'case':24} {'p50':>8} {'p90':>8} {'p99':>8}")
    for name, values in times.items():
        ms = np.array(values) * 1000
        print(f"{name:24} {np.percentile(ms, 50):8.2f} {np.percentile(ms, 90):8.2f} {np.percentile(ms, 99):8.2f}")


def _old_true(old: ModuleType) -> object:
    with old.Sandbox() as box:
        return box.run(["/bin/true"])


def _new_true() -> object:
    with sandbox.Sandbox() as box:
        return box.run(["/bin/true"])


if __name__ == "__main__":
    main()
