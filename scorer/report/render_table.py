"""The report on a terminal: one rich table per section, warnings first so they are not scrolled past."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from bench.scorer.report.cells import Section


def table(section: Section) -> Table:
    out = Table(title=section.title, title_justify="left", title_style="bold", caption_justify="left")
    for i, column in enumerate(section.columns):
        out.add_column(column, justify="right" if i in section.numeric else "left", overflow="fold")
    for row in section.rows:
        out.add_row(*row)
    if section.notes:
        out.caption = "\n".join(section.notes)
    return out


def print_warnings(console: Console, warnings: list[str]) -> None:
    for warning in warnings:
        console.print(f"[bold yellow]warning:[/] {warning}", markup=True, highlight=False)
