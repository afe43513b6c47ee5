"""`bench init`: a starter bench.yaml, and with --with-tasks a copy of the built-in catalog and its fixture
repositories to edit (docs/record.md, "Start a project")."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

from bench.core.errors import BenchError

TASKS = "tasks"  # the copied catalog: tasks/suites/*.yaml and tasks/fixtures/<name>/


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "init",
        help="write a starter bench.yaml (and, with --with-tasks, a copy of the catalog to edit)",
        description="Write a starter bench.yaml in DIR; --with-tasks also copies the built-in catalog (suites and "
        "fixture repositories) into DIR/tasks and points bench.yaml at it. Never overwrites a file.",
    )
    p.add_argument("--dir", type=Path, default=Path("."), help="where to write (default: the current folder)")
    p.add_argument(
        "--with-tasks", action="store_true", help="copy the catalog and its fixture repositories into DIR/tasks"
    )
    p.set_defaults(handler=run_init)


def run_init(args: argparse.Namespace) -> int:
    from bench.catalog import DATA_DIR, FIXTURES_DIR, SUITES_DIR

    root: Path = args.dir
    config = root / "bench.yaml"
    targets = [config] + ([root / TASKS] if args.with_tasks else [])
    there = [str(t) for t in targets if t.exists() or t.is_symlink()]
    if there:
        raise BenchError(f"{', '.join(there)} already exists: bench init never overwrites; move it or use --dir")
    root.mkdir(parents=True, exist_ok=True)
    text = (DATA_DIR / "configs" / "starter.yaml").read_text(encoding="utf-8")
    if args.with_tasks:
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        shutil.copytree(SUITES_DIR, root / TASKS / "suites", ignore=ignore)
        shutil.copytree(FIXTURES_DIR, root / TASKS / "fixtures", ignore=ignore)
        text += f"catalog: {TASKS}/suites                # the copied catalog (relative to this file); edit it freely\n"
    with open(config, "x", encoding="utf-8") as fh:  # "x": a file made meanwhile is not overwritten either
        fh.write(text)
    print(f"wrote {config}" + (f" and {root / TASKS}/ (suites and fixtures)" if args.with_tasks else ""))
    print("next: edit upstream and models, then")
    print(f"  bench doctor --upstream URL && bench record --config {config}")
    if args.with_tasks:
        print(f"  bench catalog validate {root / TASKS / 'suites'}    # after editing the tasks")
    return 0
