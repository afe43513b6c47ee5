"""Code-execution evaluators: the answer's program runs in scorer.sandbox and its stdout is compared.

The program is the first fenced block tagged with the language, else the first untagged fenced block, else the
whole answer. Output is compared with trailing whitespace removed from each line and from the end.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from scorer import sandbox
from scorer.evaluators._args import number, string
from scorer.registry import REQUIRED, ArgError, EvalContext, Score, evaluator

_FENCE = re.compile(r"```([\w+#-]*)[ \t]*\n(.*?)```", re.DOTALL)
PYTHON_TAGS = frozenset({"python", "py", "python3"})
C_TAGS = frozenset({"c", "h"})


def extract_code(text: str, tags: frozenset[str]) -> str:
    untagged = None
    for m in _FENCE.finditer(text):
        tag = m.group(1).lower()
        if tag in tags:
            return m.group(2)
        if not tag and untagged is None:
            untagged = m.group(2)
    return untagged if untagged is not None else text


def normalize_output(s: str) -> str:
    return "\n".join(line.rstrip() for line in s.replace("\r\n", "\n").split("\n")).rstrip()


def _compare(result: sandbox.RunResult, expected: str) -> Score:
    if not result.ok:
        return Score(0.0, result.describe())
    got, want = normalize_output(result.stdout), normalize_output(expected)
    if got == want:
        return Score(1.0, "stdout matches")
    return Score(0.0, f"stdout {got[:80]!r} != {want[:80]!r}")


def _timeout(args: Mapping[str, Any]) -> float:
    t = number(args, "timeout_s")
    if not 0 < t <= 60:
        raise ArgError("timeout_s must be in (0, 60]")
    return t


@evaluator("python_output", args={"expected_stdout": REQUIRED, "stdin": "", "harness": "", "timeout_s": 5})
def python_output(ctx: EvalContext, args: Mapping[str, Any]) -> Score:
    expected, stdin, harness = string(args, "expected_stdout"), string(args, "stdin"), string(args, "harness")
    timeout = _timeout(args)
    code = extract_code(ctx.text, PYTHON_TAGS)
    if harness:
        code = code.rstrip() + "\n\n" + harness + "\n"
    result = sandbox.run_python(code, stdin, timeout)
    if result is None:
        return Score.skipped("no Python interpreter the sandbox can run")
    return _compare(result, expected)


@evaluator("c_output", args={"expected_stdout": REQUIRED, "stdin": "", "timeout_s": 5})
def c_output(ctx: EvalContext, args: Mapping[str, Any]) -> Score:
    expected, stdin = string(args, "expected_stdout"), string(args, "stdin")
    timeout = _timeout(args)
    outcome = sandbox.run_c(extract_code(ctx.text, C_TAGS), stdin, timeout)
    if outcome is None:
        return Score.skipped("no C compiler (cc, gcc or clang) on this machine")
    stage, result = outcome
    if stage == "compile":
        return Score(0.0, f"does not compile: {result.describe()}")
    return _compare(result, expected)
