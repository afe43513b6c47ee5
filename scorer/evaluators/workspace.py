"""Workspace evaluators: the fixture's final state after replaying the recorded tool calls (scorer.workspace_replay)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scorer.evaluators._args import string
from scorer.evaluators.values import normalize_path
from scorer.registry import REQUIRED, ArgError, EvalContext, Score, evaluator


def _target(ctx: EvalContext, args: Mapping[str, Any]) -> tuple[str, Path]:
    if ctx.test.workspace is None:
        raise ArgError("workspace checks need a test with a workspace")
    rel = normalize_path(string(args, "path"))
    if not rel or rel.startswith(".."):
        raise ArgError(f"path {args['path']!r} must stay inside the workspace")
    return rel, ctx.workspace.path / rel


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


@evaluator("file_exists", args={"path": REQUIRED})
def file_exists(ctx: EvalContext, args: Mapping[str, Any]) -> Score:
    rel, path = _target(ctx, args)
    return Score.of(path.exists(), f"{rel} {'exists' if path.exists() else 'does not exist'}")


@evaluator("file_contains", args={"path": REQUIRED, "value": None, "regex": None}, one_of=(("value", "regex"),))
def file_contains(ctx: EvalContext, args: Mapping[str, Any]) -> Score:
    rel, path = _target(ctx, args)
    text = _read(path)
    if text is None:
        return Score(0.0, f"{rel} does not exist")
    if args.get("regex") is not None:
        pattern = string(args, "regex")
        try:
            found = re.search(pattern, text, re.MULTILINE) is not None
        except re.error as exc:
            raise ArgError(f"regex {pattern!r} is invalid: {exc}") from None
        return Score.of(found, f"{rel} {'matches' if found else 'does not match'} /{pattern}/")
    value = string(args, "value")
    return Score.of(value in text, f"{rel} {'contains' if value in text else 'lacks'} {value!r}")


@evaluator("file_not_contains", args={"path": REQUIRED, "value": REQUIRED})
def file_not_contains(ctx: EvalContext, args: Mapping[str, Any]) -> Score:
    rel, path = _target(ctx, args)
    value = string(args, "value")
    text = _read(path)
    if text is None:
        return Score(1.0, f"{rel} does not exist")
    return Score.of(value not in text, f"{rel} {'still contains' if value in text else 'lacks'} {value!r}")


@evaluator("file_unchanged", args={"path": REQUIRED})
def file_unchanged(ctx: EvalContext, args: Mapping[str, Any]) -> Score:
    rel, path = _target(ctx, args)
    original = ctx.workspace.fixture / rel
    before = original.read_bytes() if original.is_file() else None
    after = path.read_bytes() if path.is_file() else None
    ok = before == after
    return Score.of(ok, f"{rel} unchanged" if ok else f"{rel} was {'deleted' if after is None else 'changed'}")


@evaluator("command_succeeds", args={"command": REQUIRED, "expect_exit": 0})
def command_succeeds(ctx: EvalContext, args: Mapping[str, Any]) -> Score:
    if ctx.test.workspace is None:
        raise ArgError("command_succeeds needs a test with a workspace")
    argv = args["command"]
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise ArgError("command must be a non-empty list of strings")
    expect = args["expect_exit"]
    if isinstance(expect, bool) or not isinstance(expect, int):
        raise ArgError("expect_exit must be an integer")
    code, output = ctx.workspace.ws.run(argv)
    ok = code == expect
    tail = output.strip().splitlines()[-1:] if output.strip() else []
    detail = f"{' '.join(argv)} exited {code}" + ("" if ok else f" (expected {expect})")
    return Score.of(ok, detail + (f": {tail[0][:160]}" if tail and not ok else ""))
