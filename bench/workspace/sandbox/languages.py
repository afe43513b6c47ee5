"""The programs code checks run: a Python interpreter and a C compiler the sandbox can execute."""

from __future__ import annotations

import functools
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.workspace.sandbox.box import Sandbox
from bench.workspace.sandbox.limits import Limits, RunResult, SandboxUnavailable
from bench.workspace.sandbox.view import PATH, SYSTEM


@dataclass(frozen=True)
class Interpreter:
    path: str
    extra_ro: tuple[str, ...] = ()  # its installation, when it lives outside the system directories


def _in_system(path: str) -> bool:
    real = os.path.realpath(path)
    return any(real == d or real.startswith(d.rstrip("/") + "/") for d in map(os.path.realpath, SYSTEM))


def _candidates() -> list[Interpreter]:
    """bench's own Python's installation first (its prefix bound read-only: a pyenv or conda build, never a whole
    home), then the usual system ones."""
    found: list[Interpreter] = []
    own = os.path.realpath(sys.executable)
    prefix = os.path.realpath(sys.base_prefix)
    home = os.path.realpath(Path.home())
    if _in_system(own):
        found.append(Interpreter(own))
    elif own.startswith(prefix + "/") and prefix != "/" and not (home + "/").startswith(prefix + "/"):
        found.append(Interpreter(own, (prefix,)))
    for path in ("/usr/local/bin/python3", "/usr/bin/python3"):
        if os.path.exists(path):
            found.append(Interpreter(path))
    return list(dict.fromkeys(found))


@functools.cache
def python_interpreter() -> Interpreter | None:
    """The first interpreter that runs in the sandbox (a pyenv under /root cannot be bound by the sandbox user).
    Raises SandboxUnavailable when no program can run sandboxed at all."""
    for candidate in _candidates():
        with Sandbox() as box:
            try:
                if box.run([candidate.path, "-c", "pass"], limits=Limits(timeout_s=10), extra_ro=candidate.extra_ro).ok:
                    return candidate
            except SandboxUnavailable:
                if not candidate.extra_ro:
                    raise
    return None


@functools.cache
def c_compiler() -> str | None:
    for name in ("cc", "gcc", "clang"):
        found = shutil.which(name, path=PATH)
        if found is not None and _in_system(found):
            return found
    return None


def run_python(code: str, stdin: str, timeout_s: float, **limits: Any) -> RunResult | None:
    """None when no usable interpreter exists (the check is then skipped, never zero)."""
    python = python_interpreter()
    if python is None:
        return None
    with Sandbox() as box:
        box.write("main.py", code)
        return box.run(
            [python.path, "-I", "main.py"],
            stdin=stdin,
            limits=Limits(timeout_s=timeout_s, **limits),
            extra_ro=python.extra_ro,
        )


def run_c(source: str, stdin: str, timeout_s: float, *, compiler: str | None = None) -> tuple[str, RunResult] | None:
    """("compile"|"run", result), or None when there is no C compiler."""
    cc = compiler if compiler is not None else c_compiler()
    if cc is None or shutil.which(cc) is None:
        return None
    with Sandbox() as box:
        box.write("main.c", source)
        # The compiler needs more memory and processes (cc1, as, ld) than the program it builds, and writes `main`.
        build = box.run(
            [cc, "-O1", "-std=c11", "-w", "-o", "main", "main.c", "-lm"],
            limits=Limits(timeout_s=30, memory_bytes=2 << 30, file_bytes=64 << 20),
            keep=True,
        )
        if not build.ok:
            return "compile", build
        return "run", box.run(["./main"], stdin=stdin, limits=Limits(timeout_s=timeout_s))
