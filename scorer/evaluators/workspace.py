"""Workspace evaluators: the fixture's final state after replaying the recorded tool calls
(bench.scorer.workspace_replay)."""

from __future__ import annotations

import re

from bench.scorer.evaluators.values import normalize_path
from bench.scorer.registry import ArgError, EvalContext, Score, evaluator
from bench.scorer.signature import Argv
from bench.workspace.paths import ToolError, read_inside


def _target(ctx: EvalContext, given: str) -> str:
    if ctx.test.workspace is None:
        raise ArgError("workspace checks need a test with a workspace")
    rel = normalize_path(given)
    if not rel or rel.startswith(".."):
        raise ArgError(f"path {given!r} must stay inside the workspace")
    return rel


def _bytes(ctx: EvalContext, rel: str) -> bytes | None:
    """The workspace file's bytes, read as read_inside reads them: a program ran there (a link out, a FIFO or
    /dev/zero in its place is no file); too large scores as missing content, never as memory."""
    try:
        return read_inside(ctx.workspace.path, rel)
    except ToolError:
        return None


def _read(ctx: EvalContext, rel: str) -> str | None:
    data = _bytes(ctx, rel)
    return None if data is None else data.decode("utf-8", errors="replace")


@evaluator("file_exists", needs_workspace=True)
def file_exists(ctx: EvalContext, *, path: str) -> Score:
    """the file exists (a regular file inside the workspace)"""
    rel = _target(ctx, path)
    found = _bytes(ctx, rel) is not None
    return Score.of(found, f"{rel} {'exists' if found else 'does not exist'}")


@evaluator("file_contains", one_of=[("value", "regex")], needs_workspace=True)
def file_contains(ctx: EvalContext, *, path: str, value: str | None = None, regex: str | None = None) -> Score:
    """substring / `re.search` with MULTILINE"""
    rel = _target(ctx, path)
    text = _read(ctx, rel)
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
    rel = _target(ctx, path)
    text = _read(ctx, rel)
    if text is None:
        return Score(1.0, f"{rel} does not exist")
    return Score.of(value not in text, f"{rel} {'still contains' if value in text else 'lacks'} {value!r}")


@evaluator("file_unchanged", needs_workspace=True)
def file_unchanged(ctx: EvalContext, *, path: str) -> Score:
    """same bytes as the fixture's file (or both absent)"""
    rel = _target(ctx, path)
    original = ctx.workspace.fixture / rel
    before = original.read_bytes() if original.is_file() else None
    after = _bytes(ctx, rel)
    ok = before == after
    return Score.of(ok, f"{rel} unchanged" if ok else f"{rel} was {'deleted' if after is None else 'changed'}")


@evaluator("command_succeeds", needs_workspace=True)
def command_succeeds(ctx: EvalContext, *, command: Argv, expect_exit: int = 0) -> Score:
    """exit code is `expect_exit`, run in the code sandbox on the workspace (no shell; `python`/`python3` = the
    sandbox's interpreter)"""
    if ctx.test.workspace is None:
        raise ArgError("command_succeeds needs a test with a workspace")
    argv, expect = command, expect_exit
    code, output = ctx.workspace.ws.run(argv)
    ok = code == expect
    tail = output.strip().splitlines()[-1:] if output.strip() else []
    detail = f"{' '.join(argv)} exited {code}" + ("" if ok else f" (expected {expect})")
    return Score.of(ok, detail + (f": {tail[0][:160]}" if tail and not ok else ""))
