"""Unified diffs as models write them: parsed leniently, applied strictly.

Parsing ignores the line counts of `@@` headers (models miscount them; `git apply --recount` does the same): a hunk
runs until the next hunk or file header, or a line that cannot belong to a hunk. Applying is strict about content:
every context and removed line must be found, in order, as a contiguous block; only the position may drift from the
header's line number (nearest match wins), with a second pass that ignores trailing whitespace. A patch applies to
all of its files or to none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from bench.workspace.paths import ToolError, relative, resolve

_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


class PatchError(ToolError):
    """A patch that cannot be parsed or does not apply."""


@dataclass
class HunkLine:
    op: str  # " " context, "-" removed, "+" added
    text: str
    eol: bool = True  # False after a "\ No newline at end of file" marker
    bare: bool = False  # an empty patch line (no leading space): context, unless it trails the hunk


@dataclass
class Hunk:
    old_start: int
    new_start: int
    lines: list[HunkLine] = field(default_factory=list)

    @property
    def old(self) -> list[str]:
        return [line.text for line in self.lines if line.op != "+"]


@dataclass
class FilePatch:
    old_path: str | None  # None: /dev/null (the file is created)
    new_path: str | None  # None: /dev/null (the file is deleted)
    hunks: list[Hunk] = field(default_factory=list)


def _header_path(raw: str) -> str | None:
    path = raw.split("\t", 1)[0].strip()
    if len(path) >= 2 and path[0] == path[-1] == '"':
        path = path[1:-1]
    return None if path == "/dev/null" else path


def _is_file_header(lines: list[str], i: int) -> bool:
    return lines[i].startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")


def parse_patch(text: str) -> list[FilePatch]:
    """The file patches of a unified diff; PatchError if it has no file header or a malformed hunk."""
    if not isinstance(text, str):
        raise PatchError("patch must be a string holding a unified diff")
    lines = text.splitlines()
    patches: list[FilePatch] = []
    current: FilePatch | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if _is_file_header(lines, i):
            current = FilePatch(_header_path(line[4:]), _header_path(lines[i + 1][4:]))
            if current.old_path is None and current.new_path is None:
                raise PatchError("a file header names /dev/null on both sides")
            patches.append(current)
            i += 2
            continue
        if line.startswith("@@"):
            if current is None:
                raise PatchError("hunk before any '--- a/path' / '+++ b/path' file header")
            match = _HUNK_RE.match(line)
            if match is None:
                raise PatchError(f"malformed hunk header {line[:60]!r}: expected '@@ -start,count +start,count @@'")
            hunk = Hunk(int(match.group(1)), int(match.group(2)))
            i = _parse_hunk_body(lines, i + 1, hunk)
            while hunk.lines and hunk.lines[-1].bare:
                hunk.lines.pop()  # blank lines after a hunk are separators, not context
            if not any(hl.op != " " for hl in hunk.lines):
                raise PatchError(f"hunk {line[:60]!r} changes nothing")
            current.hunks.append(hunk)
            continue
        i += 1  # "diff --git", "index", prose around the diff: not part of any hunk
    if not patches:
        raise PatchError("no file header found: a unified diff starts with '--- a/path' then '+++ b/path'")
    for fp in patches:
        if not fp.hunks:
            raise PatchError(f"no hunks for {fp.new_path or fp.old_path}")
    return patches


def _parse_hunk_body(lines: list[str], i: int, hunk: Hunk) -> int:
    while i < len(lines):
        line = lines[i]
        if line.startswith(("@@", "diff ")) or _is_file_header(lines, i):
            break
        if line == "":
            hunk.lines.append(HunkLine(" ", "", bare=True))  # an editor stripped the context line's leading space
        elif line[0] in " -+":
            hunk.lines.append(HunkLine(line[0], line[1:]))
        elif line.startswith("\\"):
            if hunk.lines:
                hunk.lines[-1].eol = False
        else:
            break
        i += 1
    return i


def _strip_prefix(root: Path, path: str, prefix: str) -> str:
    if path.startswith(prefix) and not (root / path).exists():
        return path[len(prefix) :]
    return path


def _exact(line: str) -> str:
    return line.rstrip("\r\n")


def _loose(line: str) -> str:
    return line.rstrip()


def _find(lines: list[str], old: list[str], expected: int, start: int) -> int | None:
    last = len(lines) - len(old)
    if last < start:
        return None
    expected = min(max(expected, start), last)
    for key in (_exact, _loose):
        want = [key(s) for s in old]
        have = [key(s) for s in lines]
        for distance in range(0, max(expected - start, last - expected) + 1):
            for pos in (expected - distance, expected + distance):
                if start <= pos <= last and have[pos : pos + len(old)] == want:
                    return pos
    return None


def apply_hunks(lines: list[str], hunks: list[Hunk], name: str) -> list[str]:
    """`lines` (with their line endings) after the hunks; PatchError naming the first hunk that does not apply."""
    lines = list(lines)
    offset = 0
    start = 0
    for number, hunk in enumerate(hunks, 1):
        old = hunk.old
        # A hunk removing nothing names the line it inserts after; any other names its first line.
        stated = hunk.old_start - 1 if old else hunk.old_start
        if old:
            pos = _find(lines, old, stated + offset, start)
            if pos is None:
                raise PatchError(
                    f"{name}: hunk {number} (@@ -{hunk.old_start} @@) does not apply: its context and removed lines "
                    "were not found; read the file again and resend the patch"
                )
        else:
            pos = min(max(stated + offset, start), len(lines))
        segment = lines[pos : pos + len(old)]
        out: list[str] = []
        j = 0
        for hl in hunk.lines:
            if hl.op == " ":
                out.append(segment[j])
                j += 1
            elif hl.op == "-":
                j += 1
            else:
                out.append(hl.text + ("\n" if hl.eol else ""))
        lines[pos : pos + len(old)] = out
        offset = pos - stated + len(out) - len(old)
        start = pos + len(out)
    # A line that lost its final newline in the old file but is no longer last must get one back.
    return [s if s.endswith("\n") or k == len(lines) - 1 else s + "\n" for k, s in enumerate(lines)]


def _read_lines(path: Path, name: str) -> list[str]:
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            return fh.read().splitlines(keepends=True)
    except UnicodeDecodeError:
        raise PatchError(f"{name} is not a UTF-8 text file") from None


def apply_patch(root: Path, text: str) -> str:
    """Apply a unified diff to the workspace at `root` (all files or none); a summary line per file."""
    patches = parse_patch(text)
    state: dict[Path, list[str] | None] = {}
    summary: list[str] = []
    for fp in patches:
        if fp.old_path is None:
            assert fp.new_path is not None
            source = resolve(root, _strip_prefix(root, fp.new_path, "b/"))
            name = relative(root, source)
            existing = (
                state.get(source) if source in state else (_read_lines(source, name) if source.exists() else None)
            )
            if existing:
                raise PatchError(f"{name} already exists: the patch creates it from /dev/null")
            lines: list[str] = []
        else:
            source = resolve(root, _strip_prefix(root, fp.old_path, "a/"))
            name = relative(root, source)
            current = state[source] if source in state else (_read_lines(source, name) if source.is_file() else None)
            if current is None:
                raise PatchError(f"{name}: no such file")
            lines = current
        new_lines = apply_hunks(lines, fp.hunks, name)
        if fp.new_path is None:
            state[source] = None
            summary.append(f"deleted {name}")
            continue
        target = resolve(root, _strip_prefix(root, fp.new_path, "b/"))
        if target != source and fp.old_path is not None:
            state[source] = None
        state[target] = new_lines
        verb = "created" if fp.old_path is None else "patched"
        summary.append(f"{verb} {relative(root, target)} ({len(fp.hunks)} hunk{'s' if len(fp.hunks) != 1 else ''})")
    for path, content in state.items():
        if content is not None and path.is_dir():
            raise PatchError(f"{relative(root, path)} is a directory")
    for path, content in state.items():
        if content is None:
            if path.is_file():
                path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("w", encoding="utf-8", newline="") as fh:
                fh.write("".join(content))
    return "\n".join(summary)
