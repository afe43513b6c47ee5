"""Sections as GitHub-flavoured Markdown (pipe tables), for pull requests and notes (bench.scorer.report.formats)."""

from __future__ import annotations

from bench.scorer.report.cells import Section


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(section: Section) -> str:
    align = ["---:" if i in section.numeric else "---" for i in range(len(section.columns))]
    lines = [f"## {section.title}", ""]
    lines.append("| " + " | ".join(cell(c) for c in section.columns) + " |")
    lines.append("| " + " | ".join(align) + " |")
    lines.extend("| " + " | ".join(cell(v) for v in row) + " |" for row in section.rows)
    lines.extend(["", *(f"_{cell(note)}_" for note in section.notes)])
    return "\n".join(lines).rstrip() + "\n"
