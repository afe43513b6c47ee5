"""The evaluator tables in docs/scorer.md and docs/catalog.md, generated from the evaluators' signatures.

    python -m bench.scorer.evaluator_docs           # rewrite the tables in place
    python -m bench.scorer.evaluator_docs --check   # exit 1 if a table disagrees with the code (a test runs this)

A table lives between `<!-- generated: KIND GROUP... -->` and `<!-- end generated -->`; KIND is `evaluators` (name,
arguments, what it scores: docs/scorer.md) or `arguments` (each argument's type and default: docs/catalog.md), GROUP
the evaluators' module names (text, tools, ...), none meaning all. Every evaluator must appear in a scorer.md table.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from bench.scorer.checks import find_evaluator
from bench.scorer.registry import EVALUATORS, Evaluator
from bench.scorer.signature import REQUIRED, Param, names_tool, type_name

DOCS = Path(__file__).resolve().parent.parent / "docs"
FILES = ("scorer.md", "catalog.md")
_BLOCK = re.compile(r"(<!-- generated: ([\w ]+) -->\n)(.*?)(<!-- end generated -->)", re.DOTALL)


def _literal(value: Any) -> str:
    """A default as the YAML would spell it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '""' if value == "" else value
    return f"{value:g}".replace("e-0", "e-") if isinstance(value, float) else repr(value)


def _groups(names: Iterable[str]) -> list[Evaluator]:
    find_evaluator("equals")  # loads the built-in evaluators
    wanted = set(names)
    # Registration order: module by module as scorer/evaluators/__init__.py imports them, then source order.
    return [ev for ev in EVALUATORS.values() if not wanted or ev.group in wanted]


def _short_args(ev: Evaluator) -> str:
    shown: list[str] = []
    done: set[str] = set()
    for p in ev.params:
        if p.name in done:
            continue
        group = next((g for g in ev.one_of if p.name in g), None)
        if group is not None:
            shown.append(" or ".join(f"`{n}`" for n in group) + " (exactly one)")
            done.update(group)
        elif p.default is REQUIRED:
            shown.append(f"`{p.name}`")
        elif p.default is None:
            shown.append(f"`{p.name}?`")
        else:
            shown.append(f"`{p.name}: {_literal(p.default)}`")
    return ", ".join(shown) or "—"


def _typed(p: Param) -> str:
    kind = type_name(p.type)
    if names_tool(p.type):
        kind += " (each one of the test's tools)" if kind.endswith("s") else " (one of the test's tools)"
    if p.default is REQUIRED:
        return f"`{p.name}`: {kind}"
    if p.default is None:
        return f"`{p.name}?`: {kind}"
    return f"`{p.name}`: {kind} = `{_literal(p.default)}`"


def evaluators_table(groups: Iterable[str]) -> str:
    rows = ["| name | arguments | scores |", "|---|---|---|"]
    rows += [f"| `{ev.name}` | {_short_args(ev)} | {ev.doc} |" for ev in _groups(groups)]
    return "\n".join(rows) + "\n"


def arguments_table(groups: Iterable[str]) -> str:
    rows = ["| evaluator | arguments (`?`: optional) | defined in |", "|---|---|---|"]
    for ev in _groups(groups):
        typed = "; ".join(_typed(p) for p in ev.params) or "—"
        if ev.one_of:
            typed += "; exactly one of " + ", ".join("/".join(f"`{n}`" for n in g) for g in ev.one_of)
        rows.append(f"| `{ev.name}` | {typed} | `scorer/evaluators/{ev.group}.py` |")
    return "\n".join(rows) + "\n"


RENDERERS: dict[str, Callable[[Iterable[str]], str]] = {"evaluators": evaluators_table, "arguments": arguments_table}


def regenerate(text: str) -> str:
    """The document with every generated table rendered afresh."""

    def render(m: re.Match[str]) -> str:
        kind, *groups = m.group(2).split()
        if kind not in RENDERERS:
            raise ValueError(f"unknown generated table {kind!r}; use one of {', '.join(RENDERERS)}")
        return m.group(1) + RENDERERS[kind](groups) + m.group(4)

    return _BLOCK.sub(render, text)


def undocumented(text: str) -> list[str]:
    """Evaluators in no `evaluators` table of this document."""
    covered: set[str] = set()
    for m in _BLOCK.finditer(text):
        kind, *groups = m.group(2).split()
        if kind == "evaluators":
            covered.update(ev.name for ev in _groups(groups))
    return sorted(set(EVALUATORS) - covered)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scorer.evaluator_docs", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only report tables that disagree with the code")
    args = parser.parse_args(argv)
    stale = []
    for name in FILES:
        path = DOCS / name
        text = path.read_text(encoding="utf-8")
        fresh = regenerate(text)
        if fresh != text:
            stale.append(name)
            if not args.check:
                path.write_text(fresh, encoding="utf-8")
    missing = undocumented((DOCS / "scorer.md").read_text(encoding="utf-8"))
    if missing:
        print(f"docs/scorer.md: no evaluators table lists {', '.join(missing)}; add their module to a marker")
        return 1
    if stale and args.check:
        print(f"out of date: {', '.join(f'docs/{n}' for n in stale)}; run python -m bench.scorer.evaluator_docs")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
