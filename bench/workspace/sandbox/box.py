"""Sandbox: a directory and the programs run on it, each in a fresh bubblewrap sandbox under limits. A semaphore caps
how many programs run at once across all scorer processes."""

from __future__ import annotations

import functools
import os
import shutil
import stat
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from bench.workspace.sandbox import probe
from bench.workspace.sandbox.launch import spawn
from bench.workspace.sandbox.limits import Limits, RunResult, SandboxUnavailable
from bench.workspace.sandbox.user import hand_over
from bench.workspace.sandbox.view import Workspace, bwrap_argv


class _Semaphore(Protocol):
    def acquire(self, blocking: bool = ..., timeout: float | None = ...) -> bool: ...
    def release(self) -> None: ...


_slots: _Semaphore = threading.BoundedSemaphore(max(1, os.cpu_count() or 1))


def set_semaphore(sem: _Semaphore) -> None:
    """Share one semaphore across worker processes (the pipeline installs a multiprocessing one)."""
    global _slots
    _slots = sem


# Waits (seconds) before each new try of a program that could not start for want of processes on the machine.
SPAWN_RETRIES = (0.05, 0.2, 0.5, 1.0, 2.0)


class Sandbox:
    """Programs run on a directory: a fresh temporary one (deleted on close), or a given one (a tool workspace, kept).
    `probing` is the availability check's own use, which must not ask for itself."""

    def __init__(self, directory: Path | None = None, *, probing: bool = False) -> None:
        self._owned = directory is None
        self.dir = directory if directory is not None else probe.scratch_dir()
        self._probing = probing
        if self._owned:
            hand_over(self.dir)

    def write(self, name: str, text: str) -> Path:
        path = self.dir / name
        path.write_text(text, encoding="utf-8")
        return path

    def _files(self) -> tuple[str, ...]:
        """The regular files a run that keeps nothing sees (read-only): links and the rest are left out."""
        names = []
        for entry in os.scandir(self.dir):
            if stat.S_ISREG(entry.stat(follow_symlinks=False).st_mode):
                names.append(entry.name)
        return tuple(sorted(names))

    def run(
        self,
        argv: Sequence[str],
        *,
        stdin: str = "",
        limits: Limits | None = None,
        keep: bool = False,
        merge_stderr: bool = False,
        extra_ro: Sequence[str] = (),
    ) -> RunResult:
        """Run `argv` (its program an absolute path inside the view) with the directory at view.MOUNT: writable
        when `keep`, else a size-capped tmpfs holding read-only copies of its files. Raises SandboxUnavailable."""
        if not self._probing:
            require()
        limits = limits or Limits()
        ws = Workspace(self.dir, keep, () if keep else self._files())
        bwrap = probe.bwrap()
        assert bwrap is not None  # require() said so

        def argv_for(status_fd: int) -> list[str]:
            return bwrap_argv(bwrap, argv, ws, limits, status_fd, extra_ro)

        data = stdin.encode()
        _slots.acquire()
        try:
            for delay in SPAWN_RETRIES:
                try:
                    return spawn(argv_for, data, limits, merge_stderr=merge_stderr)
                except BlockingIOError:
                    # EAGAIN from fork: the machine is at its process limit for a moment; a program that could not
                    # start has not run, so running it again is safe. Past the last retry the error goes up.
                    time.sleep(delay)
            return spawn(argv_for, data, limits, merge_stderr=merge_stderr)
        finally:
            _slots.release()

    def close(self) -> None:
        if self._owned:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@functools.cache
def unavailable() -> str | None:
    """None when programs can run sandboxed here, else one line saying why and how to fix it (checked once per
    process by running `true` in a fresh directory of its own: no fixed names in a shared /tmp)."""
    problem = probe.missing()
    if problem is not None:
        return problem
    try:
        with Sandbox(probing=True) as box:
            result = box.run(["/bin/true"], limits=Limits(timeout_s=10))
    except SandboxUnavailable as exc:
        return str(exc)
    except OSError as exc:
        return f"bubblewrap could not start ({exc.strerror or exc}); {probe.INSTALL}"
    if not result.ok:
        return f"bubblewrap ran but a trivial program failed ({result.describe()}); see docs/security.md"
    return None


def require() -> None:
    """Raise SandboxUnavailable (saying how to fix it) unless programs can run sandboxed here: never unsandboxed."""
    problem = unavailable()
    if problem is not None:
        raise SandboxUnavailable(problem)
