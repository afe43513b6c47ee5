"""What a sandboxed run may use and what it gave back."""

from __future__ import annotations

import math
import signal
from dataclasses import dataclass

MAX_OUTPUT = 1 << 20


class SandboxUnavailable(Exception):
    """The sandbox cannot run programs here (bubblewrap missing, or no namespaces): the message says how to fix it.

    Not an OSError (the workspace tools report those as a model's failed call) and not a BenchError (a scorer turns
    it into one check's error verdict, never a whole rescore's end)."""


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 5.0
    memory_bytes: int = 512 << 20  # RLIMIT_AS, per process
    processes: int = 64  # RLIMIT_NPROC, counted inside the sandbox's own user namespace
    file_bytes: int = MAX_OUTPUT  # RLIMIT_FSIZE: no file written larger
    open_files: int = 64
    output_bytes: int = MAX_OUTPUT  # stdout and stderr each, as the parent reads them; more kills the program
    scratch_bytes: int = 64 << 20  # each tmpfs: /tmp, and the workspace of a run that keeps no files

    def rlimits(self) -> list[tuple[str, int, int]]:
        """(name, soft, hard): RLIMIT_<NAME> as prlimit's --<name> sets it inside the sandbox."""
        cpu = math.ceil(self.timeout_s) + 1
        return [
            ("CPU", cpu, cpu + 1),
            ("AS", self.memory_bytes, self.memory_bytes),
            ("FSIZE", self.file_bytes, self.file_bytes),
            ("NOFILE", self.open_files, self.open_files),
            # +1: bubblewrap's own init (PID 1 of the sandbox) runs as the same user in the same namespace.
            ("NPROC", self.processes + 1, self.processes + 1),
            ("CORE", 0, 0),
        ]


@dataclass(frozen=True)
class RunResult:
    exit_code: int | None  # negative: killed by that signal; None: never ended on its own (timeout, output cap)
    stdout: str
    stderr: str
    timed_out: bool = False
    output_limited: bool = False
    process_limited: bool = False  # killed by the parent's count (where the kernel's limit cannot bind)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not (self.timed_out or self.output_limited or self.process_limited)

    def describe(self) -> str:
        if self.timed_out:
            return "killed: time limit"
        if self.output_limited:
            return "killed: output/file size limit"
        if self.process_limited:
            return "killed: process limit"
        if self.exit_code is not None and self.exit_code < 0:
            return f"killed by signal {_signal_name(-self.exit_code)}"
        tail = self.stderr.strip().splitlines()[-1:] if self.stderr.strip() else []
        return f"exit {self.exit_code}" + (f": {tail[0][:200]}" if tail else "")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)
