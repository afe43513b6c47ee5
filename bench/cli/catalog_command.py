"""`bench catalog ls | show | validate | from-traffic`: browse the test catalog, check that it is sound, and draft tests
from recorded traffic."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from bench.catalog.model import Catalog, TestSpec
from bench.core.errors import BenchError
from bench.scorer.checked_catalog import load_catalog


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("catalog", help="list, show and validate the test catalog")
    sub = parser.add_subparsers(dest="catalog_command", metavar="ACTION")
    parser.set_defaults(handler=lambda _args: parser.print_help() or 2)

    ls = sub.add_parser("ls", help="list the tests (id, suite, category, subcategory, checks)")
    ls.add_argument("--suite", action="append", metavar="S", help="only this suite (repeatable)")
    ls.add_argument(
        "--catalog", type=Path, metavar="PATH", help="a catalog directory or suite file (default: built-in)"
    )
    ls.set_defaults(handler=cmd_ls)

    show = sub.add_parser("show", help="everything about one test, including the request it sends")
    show.add_argument("id", help="test id, e.g. tools.weather_paris")
    show.add_argument(
        "--catalog", type=Path, metavar="PATH", help="a catalog directory or suite file (default: built-in)"
    )
    show.set_defaults(handler=cmd_show)

    validate = sub.add_parser("validate", help="schema, unique ids, and every reference passing its own checks")
    validate.add_argument("path", nargs="?", type=Path, help="a catalog directory or suite file (default: built-in)")
    validate.set_defaults(handler=cmd_validate)

    drafts = sub.add_parser(
        "from-traffic",
        help="draft tests from recorded traffic: cassettes, OTel GenAI traces (OTLP JSON) or OpenAI request logs",
        description="Each conversation becomes a test: its first request, the recorded answers as the reference, "
        "checks suggested from them (docs/catalog.md, 'Tests from traffic'). Edit before use.",
    )
    drafts.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="cassettes or folders; .json/.jsonl files")
    drafts.add_argument("--out", type=Path, required=True, metavar="DIR", help="the folder for SUITE.yaml")
    drafts.add_argument("--suite", default="from_traffic", help="the suite's name (default from_traffic)")
    drafts.set_defaults(handler=cmd_from_traffic)


def _console() -> Any:
    from rich.console import Console

    return Console(highlight=False)


def cmd_ls(args: argparse.Namespace) -> int:
    from rich.table import Table

    catalog = load_catalog(args.catalog)
    tests = catalog.select(args.suite)
    if args.suite and not tests:
        suites = sorted({t.suite for t in catalog.tests.values()})
        raise BenchError(f"no tests in suite {', '.join(args.suite)}; suites: {', '.join(suites)}")
    table = Table(title=f"{len(tests)} tests", title_justify="left")
    for column in ("id", "suite", "category", "subcategory", "checks"):
        table.add_column(column, overflow="fold")
    for test in tests:
        table.add_row(test.id, test.suite, test.category, test.subcategory, _evaluators(test))
    console = _console()
    console.print(table)
    console.print(f"catalog hash {catalog.hash}")
    return 0


def _evaluators(test: TestSpec) -> str:
    counts = Counter(c.evaluator for c in test.checks)
    return ", ".join(name if n == 1 else f"{name}×{n}" for name, n in counts.items())


def request_preview(test: TestSpec, model: str = "MODEL") -> dict[str, Any]:
    """The chat completion body of the test's first turn, before the run's settings (temperature, seed, stream)."""
    body: dict[str, Any] = {"model": model, "messages": [dict(m) for m in test.messages]}
    if test.tools:
        body["tools"] = [dict(t) for t in test.tools]
    body.update(test.params)
    return body


def _find(catalog: Catalog, test_id: str) -> TestSpec:
    if test_id in catalog.tests:
        return catalog.tests[test_id]
    matches = [t for t in catalog.tests.values() if t.id.split(".", 1)[-1] == test_id]
    if len(matches) == 1:
        return matches[0]
    close = sorted(t for t in catalog.tests if test_id in t)[:5]
    hint = f"; did you mean {', '.join(close)}?" if close else "; list them with `bench catalog ls`"
    raise BenchError(f"no test {test_id!r} in the catalog{hint}")


def cmd_show(args: argparse.Namespace) -> int:
    from rich.syntax import Syntax

    test = _find(load_catalog(args.catalog), args.id)
    console = _console()
    console.print(
        f"[bold]{test.id}[/bold]  suite={test.suite}  category={test.category}  subcategory={test.subcategory}"
    )
    console.print(test.description)
    console.print(f"source: {test.source}")
    console.print(f"hash: {test.hash}")
    console.print(f"limits: max_turns={test.limits.max_turns} max_calls={test.limits.max_calls}")
    console.print(f"pass threshold: {test.pass_threshold:g}")
    if test.workspace is not None:
        ws = test.workspace
        console.print(
            f"workspace: fixture={ws.fixture} tools={', '.join(ws.tools)} "
            f"allow_commands={', '.join(ws.allow_commands) or '-'}"
        )
    console.print("\n[bold]checks[/bold]")
    for check in test.checks:
        console.print(
            f"  {check.evaluator} (weight {check.weight:g}) {json.dumps(dict(check.args), ensure_ascii=False)}"
        )
    console.print("\n[bold]reference[/bold]")
    for number, turn in enumerate(test.reference.turns):
        for call in turn:
            console.print(f"  turn {number}: {call.name}({json.dumps(dict(call.arguments), ensure_ascii=False)})")
    if test.reference.answer is not None:
        console.print(f"  answer: {test.reference.answer}")
    console.print(
        "\n[bold]request[/bold] (first turn; the run adds temperature, seed, stream and its max_tokens floor)"
    )
    console.print(Syntax(json.dumps(request_preview(test), indent=2, ensure_ascii=False), "json", word_wrap=True))
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    catalog = load_catalog(args.path)  # schema, evaluator names and arguments, unique ids: BenchError if bad
    console = _console()
    suites = sorted({t.suite for t in catalog.tests.values()})
    console.print(f"{len(catalog.tests)} tests in {len(suites)} suites ({', '.join(suites)}): schema and ids ok")
    # Imported here, not at the top: `bench --help` imports this module and should stay fast.
    from bench.scorer.reference import check_reference

    problems = [p for test in catalog.tests.values() for p in check_reference(test)]
    for problem in problems:
        console.print(f"[red]✗[/red] {problem}")
    if problems:
        console.print(f"catalog hash {catalog.hash}")
        raise BenchError(f"{len(problems)} reference problem(s) above: fix each test's checks or its reference")
    console.print(f"every reference passes its own checks ({len(catalog.tests)} tests)")
    console.print(f"catalog hash {catalog.hash}")
    return 0


def cmd_from_traffic(args: argparse.Namespace) -> int:
    from bench.scorer import drafts

    missing = [str(p) for p in args.paths if not p.exists()]
    if missing:
        raise BenchError(f"{missing[0]}: no such file or folder; give cassettes, OTLP JSON traces or a request log")
    found = drafts.draft(drafts.seen_in(args.paths), args.suite)
    console = _console()
    for why, n in sorted(found.skipped.items()):
        console.print(f"left out {n} conversation(s): {why}")
    if not found.tests:
        raise BenchError(f"no test drafted from {found.conversations} conversation(s): see the reasons above")
    path = drafts.write_suite(found.tests, args.suite, args.out)
    failing = drafts.checked(path)
    if failing:  # a draft its own reference fails is a bug here, not the editor's: left out, said
        kept = [t for t in found.tests if t["id"] not in failing]
        console.print(f"left out {len(failing)} draft(s) whose reference fails its checks: {', '.join(failing)}")
        if not kept:
            path.unlink()
            raise BenchError("no drafted test passes its own checks")
        path = drafts.write_suite(kept, args.suite, args.out)
        found.tests = kept
    console.print(
        f"{len(found.tests)} test(s) drafted from {found.conversations} conversation(s) -> {path}; "
        f"check them with `bench catalog validate {args.out}`, score the recording with "
        f"`bench rescore PATH --catalog {args.out}`"
    )
    return 0
