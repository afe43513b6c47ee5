"""The file tools: read_file, list_dir, grep, edit_file and apply_patch."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from bench.workspace.patch import apply_patch as _apply_patch
from bench.workspace.paths import ToolError, relative, resolve
from bench.workspace.registry import ToolContext, tool, truncate

MAX_READ = 20_000
MAX_MATCHES = 200


def _text(path: Path, name: str) -> str:
    if not path.is_file():
        raise ToolError(f"{name}: no such file" if not path.exists() else f"{name} is a directory, not a file")
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            return fh.read()
    except UnicodeDecodeError:
        raise ToolError(f"{name} is not a UTF-8 text file") from None


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as fh:
        fh.write(text)


@tool(
    "read_file",
    "Read a text file of the repository. Returns its content.",
    {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "File path relative to the repository root."}},
        "required": ["path"],
    },
)
def read_file(ctx: ToolContext, args: Mapping[str, Any]) -> str:
    path = resolve(ctx.root, args["path"])
    return truncate(_text(path, relative(ctx.root, path)), MAX_READ)


@tool(
    "list_dir",
    "List a directory of the repository (sorted; directories end with '/').",
    {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Directory relative to the repository root; '.' for the root."}
        },
        "required": ["path"],
    },
)
def list_dir(ctx: ToolContext, args: Mapping[str, Any]) -> str:
    path = resolve(ctx.root, args.get("path", "."), allow_root=True)
    name = relative(ctx.root, path)
    if not path.is_dir():
        raise ToolError(f"{name}: no such directory" if not path.exists() else f"{name} is a file, not a directory")
    entries = sorted(p.name + ("/" if p.is_dir() else "") for p in path.iterdir())
    return "\n".join(entries) if entries else "(empty directory)"


def _walk(root: Path, top: Path) -> Iterator[Path]:
    if top.is_file():
        yield top
        return
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        # Skip symlinked directories: os.walk does not follow them, and a symlinked file must resolve inside.
        for name in sorted(filenames):
            file = Path(dirpath) / name
            real = file.resolve()
            if real.is_file() and (real == root or real.is_relative_to(root)):
                yield file


@tool(
    "grep",
    "Search the repository's text files for a regular expression (Python syntax). Returns 'path:line:text' lines.",
    {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Regular expression to search for."},
            "path": {
                "type": "string",
                "description": "File or directory to search, relative to the root (default '.').",
            },
        },
        "required": ["pattern"],
    },
)
def grep(ctx: ToolContext, args: Mapping[str, Any]) -> str:
    try:
        regex = re.compile(args["pattern"])
    except re.error as exc:
        raise ToolError(f"invalid regular expression: {exc}") from None
    top = resolve(ctx.root, args.get("path") or ".", allow_root=True)
    if not top.exists():
        raise ToolError(f"{relative(ctx.root, top)}: no such file or directory")
    hits: list[str] = []
    total = 0
    for file in _walk(ctx.root, top):
        try:
            text = file.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        name = relative(ctx.root, file)
        for number, line in enumerate(text.splitlines(), 1):
            if regex.search(line):
                total += 1
                if len(hits) < MAX_MATCHES:
                    hits.append(f"{name}:{number}:{line}")
    if not hits:
        return "no matches"
    if total > len(hits):
        hits.append(f"[... {total - len(hits)} more matches]")
    return "\n".join(hits)


@tool(
    "edit_file",
    "Replace one exact occurrence of `old` with `new` in a file. `old` must appear exactly once; include surrounding "
    "lines to make it unique. With an empty `old`, creates a new file holding `new`.",
    {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path relative to the repository root."},
            "old": {"type": "string", "description": "The exact text to replace."},
            "new": {"type": "string", "description": "The replacement text."},
        },
        "required": ["path", "old", "new"],
    },
)
def edit_file(ctx: ToolContext, args: Mapping[str, Any]) -> str:
    path = resolve(ctx.root, args["path"])
    name = relative(ctx.root, path)
    old, new = args["old"], args["new"]
    if old == "":
        if path.exists():
            raise ToolError(f"{name} already exists: give the exact text to replace in `old`")
        _write(path, new)
        return f"created {name}"
    text = _text(path, name)
    count = text.count(old)
    if count == 0:
        raise ToolError(f"`old` was not found in {name}; read the file and copy the text exactly")
    if count > 1:
        raise ToolError(f"`old` occurs {count} times in {name}; include more surrounding lines to make it unique")
    _write(path, text.replace(old, new, 1))
    return f"edited {name}"


@tool(
    "apply_patch",
    "Apply a unified diff (with '--- a/path' and '+++ b/path' headers and @@ hunks with context lines) to the "
    "repository. All files change or none.",
    {
        "type": "object",
        "properties": {"patch": {"type": "string", "description": "The unified diff."}},
        "required": ["patch"],
    },
)
def apply_patch(ctx: ToolContext, args: Mapping[str, Any]) -> str:
    return _apply_patch(ctx.root, args["patch"])
