"""Code-execution evaluators: the answer's program runs in bench.workspace.sandbox and its stdout is compared.

The program is the first fenced block tagged with the language, else the first untagged fenced block, else the
whole answer. Output is compared with trailing whitespace removed from each line and from the end.
"""

from __future__ import annotations

import functools
import re
import shutil

from bench.scorer.registry import ArgError, EvalContext, Score, evaluator
from bench.scorer.signature import Positive
from bench.workspace import sandbox

_FENCE = re.compile(r"```([\w+#-]*)[ \t]*\n(.*?)```", re.DOTALL)
PYTHON_TAGS = frozenset({"python", "py", "python3"})
C_TAGS = frozenset({"c", "h"})
GO_TAGS = frozenset({"go", "golang"})
# Where the sandbox looks for programs; a toolchain elsewhere (a Go in ~/go) is not one the sandbox user can run.
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
# A Go program reserves ~650 MiB of address space before main() runs (its heap arenas): under the sandbox's usual
# 512 MiB it dies in runtime.mallocinit whatever it does. The limit is on address space, not memory in use.
GO_MEMORY = 1 << 30


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


def _built(outcome: tuple[str, sandbox.RunResult] | None, expected: str, no_toolchain: str, no_build: str) -> Score:
    """A compiled language's score: skipped without its toolchain, 0 when the program does not build, else stdout."""
    if outcome is None:
        return Score.skipped(no_toolchain)
    stage, result = outcome
    if stage == "compile":
        return Score(0.0, f"{no_build}: {result.describe()}")
    return _compare(result, expected)


def _timeout(t: float) -> float:
    if not 0 < t <= 60:
        raise ArgError("timeout_s must be in (0, 60]")
    return t


@evaluator("python_output")
def python_output(
    ctx: EvalContext, *, expected_stdout: str, stdin: str = "", harness: str = "", timeout_s: Positive = 5
) -> Score:
    """stdout equals `expected_stdout`; `harness` is appended after the program, `stdin` is its input, `timeout_s`
    at most 60"""
    timeout = _timeout(timeout_s)
    code = extract_code(ctx.text, PYTHON_TAGS)
    if harness:
        code = code.rstrip() + "\n\n" + harness + "\n"
    result = sandbox.run_python(code, stdin, timeout)
    if result is None:
        return Score.skipped("no Python interpreter the sandbox can run")
    return _compare(result, expected_stdout)


@evaluator("c_output")
def c_output(ctx: EvalContext, *, expected_stdout: str, stdin: str = "", timeout_s: Positive = 5) -> Score:
    """compiled with `cc -O1 -std=c11 -lm`, stdout equals `expected_stdout`; a compile error scores 0"""
    timeout = _timeout(timeout_s)
    outcome = sandbox.run_c(extract_code(ctx.text, C_TAGS), stdin, timeout)
    return _built(outcome, expected_stdout, "no C compiler (cc, gcc or clang) on this machine", "does not compile")


@functools.cache
def go_toolchain() -> str | None:
    """The `go` command (Debian's golang-go, or an install under /usr/local), or None."""
    return shutil.which("go", path=SYSTEM_PATH)


def run_go(source: str, stdin: str, timeout_s: float) -> tuple[str, sandbox.RunResult] | None:
    """("compile"|"run", result) of a Go program written as main.go, built with `go build`; None without Go."""
    go = go_toolchain()
    if go is None:
        return None
    with sandbox.Sandbox() as box:
        box.write("main.go", source)
        # The build caches under $HOME (the sandbox directory, so nothing is shared between answers); the toolchain
        # runs several compiler processes and needs more memory and file size than the program.
        build = box.run(
            [go, "build", "-o", "main", "main.go"],
            limits=sandbox.Limits(timeout_s=60, memory_bytes=2 << 30, file_bytes=64 << 20),
            keep=True,
        )
        if not build.ok:
            return "compile", build
        return "run", box.run(
            ["./main"], stdin=stdin, limits=sandbox.Limits(timeout_s=timeout_s, memory_bytes=GO_MEMORY)
        )


@evaluator("go_output")
def go_output(ctx: EvalContext, *, expected_stdout: str, stdin: str = "", timeout_s: Positive = 5) -> Score:
    """built with `go build` (package main in main.go), stdout equals `expected_stdout`; a build error scores 0"""
    timeout = _timeout(timeout_s)
    outcome = run_go(extract_code(ctx.text, GO_TAGS), stdin, timeout)
    return _built(
        outcome,
        expected_stdout,
        "no Go toolchain (`go`) on this machine; Debian: apt-get install golang-go",
        "does not build",
    )
