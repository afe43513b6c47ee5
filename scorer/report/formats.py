"""The output formats of `bench report`, `bench compare` and `bench health`: one renderer per format, in a registry.

A command builds a Document (its warnings, its sections as tables, its JSON body and, for `bench report`, the Report
the HTML page draws its charts from); the format named by --format, or by --out's suffix, renders it to text. Adding
a format is one function here under `@output_format`, its test, and a line in docs/report.md.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from bench.core.errors import BenchError

if TYPE_CHECKING:
    # Imported for types only: `bench --help` builds the --format choices from this registry and stays fast.
    from bench.scorer.report.aggregate import Report
    from bench.scorer.report.cells import Section


@dataclass(frozen=True)
class Document:
    sections: list[Section]
    # The JSON document: every number, for scripts and dashboards.
    body: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    title: str | None = None
    # Only `bench report` has one; formats that draw charts from it are offered by that command only.
    report: Report | None = None


@dataclass(frozen=True)
class Target:
    """Where the text goes: a terminal gets colours and its own width, a file or a pipe plain text 160 wide."""

    terminal: bool = False
    width: int = 160


Renderer = Callable[[Document, Target], str]


@dataclass(frozen=True)
class OutputFormat:
    name: str
    render: Renderer
    suffixes: tuple[str, ...]
    needs_report: bool


FORMATS: dict[str, OutputFormat] = {}


def output_format(
    name: str, *, suffixes: tuple[str, ...] = (), needs_report: bool = False
) -> Callable[[Renderer], Renderer]:
    def register(render: Renderer) -> Renderer:
        if name in FORMATS:
            raise RuntimeError(f"output format {name!r} registered twice")
        FORMATS[name] = OutputFormat(name, render, suffixes, needs_report)
        return render

    return register


def report_document(report: Report) -> Document:
    """What `bench report` renders: the Report's sections and JSON body, and the Report for the HTML charts."""
    from bench.scorer.report import render_json
    from bench.scorer.report.sections import sections

    return Document(
        sections=sections(report),
        body=render_json.to_dict(report),
        warnings=report.warnings,
        title="bench report",
        report=report,
    )


def names(*, report: bool) -> tuple[str, ...]:
    """The formats a command offers (`report`: the one that has a Report to draw)."""
    return tuple(f.name for f in FORMATS.values() if report or not f.needs_report)


def from_suffix(path: Path) -> str | None:
    suffix = path.suffix.lower()
    return next((f.name for f in FORMATS.values() if suffix in f.suffixes), None)


# Files of these kinds are documents or images a text renderer must never fill: `--out r.docx` is refused.
NOT_TEXT = frozenset(
    {".docx", ".doc", ".odt", ".rtf", ".pdf", ".xlsx", ".xls", ".ods", ".pptx", ".ppt", ".png", ".jpg", ".jpeg",
     ".gif", ".svg", ".webp", ".epub", ".zip", ".gz"}
)  # fmt: skip


def choose(given: str | None, out: Path | None, *, report: bool) -> str:
    """The format to write: --format, else the one --out's suffix names, else table. An --out of a kind no format
    writes (`r.docx`), or whose suffix names a format this command does not offer, is refused in one line: never
    table text in a .docx."""
    offered = names(report=report)
    if out is not None and out.suffix.lower() in NOT_TEXT:
        suffixes = ", ".join(s for f in FORMATS.values() if f.name in offered for s in f.suffixes)
        raise BenchError(f"--out {out}: bench writes text, not {out.suffix} files; name the file {suffixes}")
    if given is not None:
        return given
    named = from_suffix(out) if out is not None else None
    if named is not None and named not in offered:
        raise BenchError(f"--out {out}: this command writes no {named}; use {', '.join(offered)} (--format)")
    return named or "table"


@output_format("table", suffixes=(".txt",))
def table(doc: Document, target: Target) -> str:
    from rich.console import Console

    from bench.scorer.report import render_table

    buffer = io.StringIO()
    console = Console(file=buffer, width=target.width, force_terminal=target.terminal, no_color=not target.terminal)
    render_table.print_warnings(console, doc.warnings)
    for section in doc.sections:
        console.print(render_table.table(section))
        console.print()
    return buffer.getvalue()


@output_format("markdown", suffixes=(".md",))
def markdown(doc: Document, target: Target) -> str:
    from bench.scorer.report.render_markdown import cell, markdown_table

    parts = [f"# {doc.title}", ""] if doc.title else []
    if doc.warnings:
        parts += [*(f"> **Warning:** {cell(w)}" for w in doc.warnings), ""]
    parts += [markdown_table(s) for s in doc.sections]
    return "\n".join(parts)


def finite(value: Any) -> Any:
    """NaN and infinities as None: JSON has no spelling for them (a distribution with no data is already None; this
    guards the odd division)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


@output_format("json", suffixes=(".json",))
def json(doc: Document, target: Target) -> str:
    return orjson.dumps(finite(doc.body), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n"


@output_format("html", suffixes=(".html", ".htm"), needs_report=True)
def html(doc: Document, target: Target) -> str:
    from bench.scorer.report import render_html

    if doc.report is None:
        raise ValueError("the html format draws a Report; only bench report has one")
    return render_html.render(doc.report)
