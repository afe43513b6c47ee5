"""Resolving a model-supplied path inside a workspace, so that no tool can touch anything outside it."""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath


class ToolError(Exception):
    """A model mistake a tool reports back as `ok=False` (never a crash, never a BenchError)."""


def resolve(root: Path, raw: object, *, allow_root: bool = False) -> Path:
    """The absolute path `raw` names inside `root`; ToolError if it is absolute, escapes or follows a symlink out.

    `root` must already be resolved. Symlinks inside the workspace are fine as long as their target stays inside:
    resolving the whole path and checking containment afterwards catches `..` and symlinks alike.
    """
    if not isinstance(raw, str):
        raise ToolError("path must be a string")
    text = raw.strip()
    if "\x00" in text:
        raise ToolError("path contains a NUL byte")
    if text in ("", ".", "./"):
        if allow_root:
            return root
        raise ToolError("path is empty: give a file path relative to the workspace root")
    pure = PurePosixPath(text)
    if pure.is_absolute() or text.startswith("~"):
        raise ToolError(f"absolute paths are not allowed: {text!r}; use a path relative to the workspace root")
    target = (root / pure).resolve()
    if target != root and not target.is_relative_to(root):
        raise ToolError(f"path escapes the workspace: {text!r}")
    if target == root and not allow_root:
        raise ToolError(f"{text!r} is the workspace root, not a file")
    return target


def relative(root: Path, path: Path) -> str:
    """The workspace-relative POSIX form of an absolute path inside it, as tools print it."""
    rel = path.relative_to(root).as_posix()
    return rel or "."


# What a check reads of one workspace file at most (a program may have written up to its file-size limit).
READ_LIMIT = 16 << 20


def read_inside(root: Path, raw: str, limit: int = READ_LIMIT) -> bytes | None:
    """The bytes of the regular file `raw` names inside `root`, or None when there is none (missing, a directory,
    a link out, a FIFO or a device: a program in the sandbox may have left any of these). Opened without following
    a final link and without blocking, checked to be a regular file, read up to `limit` bytes (more: ToolError).
    Nothing runs in the workspace between the containment check and the open: every sandboxed process has ended."""
    try:
        target = resolve(root, raw)
    except ToolError:
        return None
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise ToolError(f"{relative(root, target)} is larger than {limit >> 20} MiB")
    return data
