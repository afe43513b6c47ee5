"""Workspace evaluators: the fixture's final state after replaying the recorded tool calls
(bench.scorer.workspace_replay)."""

from __future__ import annotations

import re
from pathlib import Path

from bench.scorer.evaluators.values import normalize_path
from bench.scorer.registry import ArgError, EvalContext, Score, evaluator
from bench.scorer.signature import Argv


def _target(ctx: EvalContext, given: str) -> tuple[str, Path]:
    if ctx.test.workspace is None:
        raise ArgError("workspace checks need a test with a workspace")
    rel = normalize_path(given)
    if not rel or rel.startswith(".."):
        raise ArgError(f"path {given!r} must stay inside the workspace")
    return rel, ctx.workspace.path / rel


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


@evaluator("file_exists", needs_workspace=True)
def file_exists(ctx: EvalContext, *, path: str) -> Score:
    """the file exists"""
    rel, file = _target(ctx, path)
    return Score.of(file.exists(), f"{rel} {'exists' if file.exists() else 'does not exist'}")


@evaluator("file_contains", one_of=[("value", "regex")], needs_workspace=True)
def file_contains(ctx: EvalContext, *, path: str, value: str | None = None, regex: str | None = None) -> Score:
    """substring / `re.search` with MULTILINE"""
    rel, file = _target(ctx, path)
    text = _read(file)
    if text is None:
        return Score(0.0, f"{rel} does not exist")
    if regex is not None:
        try:
            found = re.search(regex, text, re.MULTILINE) is not None
        except re.error as exc:
            raise ArgError(f"regex {regex!r} is invalid: {exc}") from None
        return Score.of(found, f"{rel} {'matches' if found else 'does not match'} /{regex}/")
    assert value is not None  # one_of: exactly one of value and regex
    return Score.of(value in text, f"{rel} {'contains' if value in text else 'lacks'} {value!r}")


@evaluator("file_not_contains", needs_workspace=True)
def file_not_contains(ctx: EvalContext, *, path: str, value: str) -> Score:
    """the file lacks `value` (a missing file does not contain it)"""
    rel, file = _target(ctx, path)
    text = _read(file)
    if text is None:
        return Score(1.0, f"{rel} does not exist")
    return Score.of(value not in text, f"{rel} {'still contains' if value in text else 'lacks'} {value!r}")


@evaluator("file_unchanged", needs_workspace=True)
def file_unchanged(ctx: EvalContext, *, path: str) -> Score:
    """same bytes as the fixture's file (or both absent)"""
    rel, file = _target(ctx, path)
    original = ctx.workspace.fixture / rel
    before = original.read_bytes() if original.is_file() else None
    after = file.read_bytes() if file.is_file() else None
    ok = before == after
    return Score.of(ok, f"{rel} unchanged" if ok else f"{rel} was {'deleted' if after is None else 'changed'}")


@evaluator("command_succeeds", needs_workspace=True)
def command_succeeds(ctx: EvalContext, *, command: Argv, expect_exit: int = 0) -> Score:
    """exit code is `expect_exit`, run by `ToolWorkspace.run` (no shell, bare environment, timeout;
    `python`/`python3` = bench's interpreter)"""
    if ctx.test.workspace is None:
        raise ArgError("command_succeeds needs a test with a workspace")
    argv, expect = command, expect_exit
    code, output = ctx.workspace.ws.run(argv)
    ok = code == expect
    tail = output.strip().splitlines()[-1:] if output.strip() else []
    detail = f"{' '.join(argv)} exited {code}" + ("" if ok else f" (expected {expect})")
    return Score.of(ok, detail + (f": {tail[0][:160]}" if tail and not ok else ""))
